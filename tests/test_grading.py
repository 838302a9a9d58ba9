"""The grading round trip of every lesson: the reference solution scores full marks, the blank
release scores zero, and the release contains no solutions and no hidden tests."""
import json

import pytest

from course_tools.grading import round_trip
from course_tools.paths import lesson_dirs


@pytest.mark.parametrize("lesson", lesson_dirs(), ids=lambda p: p.name)
def test_reference_scores_max_and_blank_scores_zero(lesson, tmp_path):
    result = round_trip(lesson, tmp_path / lesson.name)
    assert result["max_score"] > 0
    assert result["reference_score"] == result["max_score"], result["log"]
    assert result["blank_score"] == 0, result["log"]
    released = (result["release"] / "exercises.ipynb").read_text()
    assert "BEGIN HIDDEN TESTS" not in released and "BEGIN SOLUTION" not in released
    for cell in json.loads(released)["cells"]:
        assert not cell.get("outputs")
