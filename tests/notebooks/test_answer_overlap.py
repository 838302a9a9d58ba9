"""No exercise's answer can be imported from course_lib.

Every ``### BEGIN SOLUTION`` region of every lesson's exercises is compared with every function
of ``course_lib`` (its significant lines: stripped, no blank lines, comments, docstrings or
short lines such as ``return out``). A region that shares half or more of its significant lines
with one library function fails: a student could call that function instead of solving it.
"""
import ast
import re
from pathlib import Path

import nbformat
import pytest

from course_tools.paths import LIBRARY, lesson_dirs

REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION", re.S | re.M)
SHORT = 12  # characters: shorter lines ("return out", "else:") say nothing about who wrote them


def significant(lines) -> set[str]:
    """The lines that identify code: stripped, without comments, blanks and short lines."""
    out = set()
    for line in lines:
        text = line.split("#", 1)[0].strip() if "#" in line and "'" not in line and '"' not in line else line.strip()
        if len(text) >= SHORT and not text.startswith(("#", '"""', "'''")):
            out.add(text)
    return out


def library_functions() -> dict[str, set[str]]:
    """{"module.function": significant lines} for every function (nested ones too) in course_lib."""
    found = {}
    for path in sorted(LIBRARY.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        module = ".".join(path.relative_to(LIBRARY.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                body = lines[node.lineno - 1:node.end_lineno]
                doc = ast.get_docstring(node)
                if doc:
                    first = node.body[0]
                    body = [ln for i, ln in enumerate(body, node.lineno)
                            if not first.lineno <= i <= first.end_lineno]
                found[f"{module}.{node.name}"] = significant(body)
    return found


def solution_regions(lesson: Path) -> list[tuple[str, str]]:
    nb = nbformat.read(str(lesson / "exercises.ipynb"), as_version=4)
    regions = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            for n, match in enumerate(REGION.finditer(cell.source)):
                regions.append((f"{meta.get('grade_id')}#{n + 1}", match.group(1)))
    return regions


def overlaps(region: str, functions: dict[str, set[str]]) -> list[str]:
    """Library functions sharing half or more of the region's significant lines."""
    mine = significant(region.splitlines())
    if not mine:
        return []
    return [f"{name} ({len(mine & theirs)}/{len(mine)} lines)" for name, theirs in functions.items()
            if len(mine & theirs) * 2 >= len(mine)]


@pytest.mark.parametrize("lesson", lesson_dirs(), ids=lambda p: p.name)
def test_no_solution_is_in_the_library(lesson):
    functions = library_functions()
    found = {gid: hits for gid, region in solution_regions(lesson) if (hits := overlaps(region, functions))}
    assert not found, f"solutions that course_lib already contains (a student could import them): {found}"


def test_overlap_detector_finds_a_copied_function():
    functions = {"lib.allreduce": significant(["def allreduce(data):",
                                               "    for i in range(1, len(data)):",
                                               "        data[0][:] += data[i].to(data[0].device)",
                                               "    for i in range(1, len(data)):",
                                               "        data[i][:] = data[0].to(data[i].device)"])}
    copied = "    for i in range(1, len(data)):\n        data[0][:] += data[i].to(data[0].device)\n"
    own = "    total = sum(d.to('cpu') for d in data)\n    for d in data:\n        d.copy_(total)\n"
    assert overlaps(copied, functions) == ["lib.allreduce (2/2 lines)"]
    assert overlaps(own, functions) == []
