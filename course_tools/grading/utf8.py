"""Text the grader keeps is valid UTF-8: ``valid_text`` escapes the lone surrogates a JSON
escape can spell, wherever a sandbox's text or a submitted notebook brings them."""
from __future__ import annotations


def valid_text(value):
    """``value`` with every string in it valid UTF-8: a lone surrogate (what a JSON escape such
    as ``"\\ud800"`` decodes to, and no file, CSV or page can hold) becomes its visible escape,
    the six characters ``\\ud800``. Lists and dicts (keys too) are changed in place, walked
    without recursion (JSON nests as deep as its parser allows); anything else is returned as it
    is. The grader applies it to everything it takes in from a sandbox (the student's kernel's
    messages and replies, the checker's replies) and to the submitted notebook."""
    if isinstance(value, str):
        return _valid_str(value)
    todo = [value] if isinstance(value, (dict, list)) else []
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = _valid_str(item)
                elif isinstance(item, (dict, list)):
                    todo.append(item)
            continue
        for key in [k for k in node if isinstance(k, str) and _valid_str(k) is not k]:
            node[_valid_str(key)] = node.pop(key)
        for key, item in node.items():
            if isinstance(item, str):
                node[key] = _valid_str(item)
            elif isinstance(item, (dict, list)):
                todo.append(item)
    return value


def _valid_str(text: str) -> str:
    """``text`` itself when it is valid UTF-8, else with each lone surrogate escaped (``\\ud800``)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
