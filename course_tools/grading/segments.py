"""Where a test cell's hidden tests begin: the visible part (shown to students, run in
notebook order) and the hidden part (from ``### BEGIN HIDDEN TESTS`` to the end of the cell).

The hidden part is made of hidden tests, each starting at a line ``# hidden test: <label>``
(at the top level) whose label says what it checks without its data ("padded rows of other
widths and strides: values, padding untouched"). A feedback names a hidden test by its label only,
never by its source, arguments or expected values."""
from __future__ import annotations

import re

BEGIN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*$", re.M)
LABEL = re.compile(r"^# hidden test: (\S.*?)[ \t]*$", re.MULTILINE)
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


def hidden_labels(hidden: str) -> list[tuple[int, str]]:
    """[(line number in ``hidden``, counted from 1, label)] of the hidden tests in a cell's
    hidden part, in order; [] when it labels none."""
    return [(hidden.count("\n", 0, m.start()) + 1, m.group(1)) for m in LABEL.finditer(hidden)]


def failing_label(labels: list[tuple[int, str]], line: int | None) -> int | None:
    """The index in ``labels`` of the hidden test that holds ``line`` (the top-level statement that
    failed); None when the line is unknown or comes before every label."""
    if line is None:
        return None
    found = [i for i, (start, _) in enumerate(labels) if start <= line]
    return found[-1] if found else None
