"""Where a test cell's hidden tests begin: the visible part (shown to students, run in
notebook order) and the hidden part (from ``### BEGIN HIDDEN TESTS`` to the end of the cell)."""
from __future__ import annotations

import re

BEGIN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*$", re.M)
REGION = re.compile(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.S)


def split_hidden(source: str) -> tuple[str, str]:
    """(visible, hidden) parts of a test cell's source; both compile on their own. A hidden
    region that does not start at the top level makes the whole cell hidden."""
    match = BEGIN.search(source)
    if not match:
        return source, ""
    visible, hidden = source[:match.start()], source[match.start():]
    try:
        compile(visible, "<visible>", "exec")
        compile(hidden, "<hidden>", "exec")
    except SyntaxError:
        return "", source
    if match.group(0) != match.group(0).lstrip():
        return "", source
    return visible, hidden


def visible_part(source: str) -> str:
    """The cell's source as students see it: hidden regions removed."""
    return REGION.sub("", source)
