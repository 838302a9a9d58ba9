"""No function in course_tools/ is over 60 lines (issue 36: the machinery that runs the course
reads as short functions, each of one step). A function's length is counted from its ``def``
line (its decorators not included) to its last line, docstring and comments included; a nested
function counts on its own and inside the function that holds it."""
import ast
from pathlib import Path

from course_tools.paths import REPO

MAX_LINES = 60
TOOLS = REPO / "course_tools"


def long_functions(root: Path, limit: int = MAX_LINES) -> list[str]:
    """'path:line name (N lines)' for every function under ``root`` longer than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_course_tools_is_over_60_lines():
    assert long_functions(TOOLS) == [], "split these into functions of one step each"


def test_a_function_over_the_limit_is_found(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}")
    assert long_functions(tmp_path / "pkg") == [f"pkg/m.py:5 long ({MAX_LINES + 1} lines)"]
