"""What a feedback shows of a test cell's hidden tests (issue 39, item 4): each hidden test's own
label (``# hidden test: <what it checks>``) with passed, failed or not run, never the checker's
message, whose check names and values hold the hidden data. Unit tests of the pieces; the graded
path (a lesson-14 softmax masked at the row stride) is in test_triton_grading.py.
"""
from course_tools.grading import checker
from course_tools.grading.execute import hidden_outputs
from course_tools.grading.segments import failing_label, hidden_labels, split_hidden

CELL = '''check_equal("visible", f(1), 2)
### BEGIN HIDDEN TESTS
# hidden test: larger inputs
check_equal("f(1000)", f(1000), 1001)
# hidden test: negative inputs
for x in (-5, -7):
    check_equal(f"f({x})", f(x), x + 1)
# hidden test: zero
check_equal("f(0)", f(0), 1)
### END HIDDEN TESTS
'''


def _shown(outputs) -> str:
    return "\n".join(o.get("text", "") if o["output_type"] == "stream" else "\n".join(o["traceback"])
                     for o in outputs)


def test_labels_are_read_from_the_hidden_part_with_their_lines():
    _, hidden = split_hidden(CELL)
    assert hidden_labels(hidden) == [(2, "larger inputs"), (4, "negative inputs"), (7, "zero")]
    labels = hidden_labels(hidden)
    assert [failing_label(labels, line) for line in (None, 1, 3, 5, 6, 8)] == [None, None, 0, 1, 1, 2]


def test_the_checker_reports_the_top_level_line_that_failed():
    """The line is the hidden part's own statement (a loop's first line), not a line inside it."""
    _, hidden = split_hidden(CELL)
    space = {"f": lambda x: x + 1 if x >= 0 else x, "check_equal": _check_equal}
    reply = checker._run(hidden, space)
    assert not reply["ok"] and reply["at"] == 6 and "f(-5)" in reply["evalue"]


def _check_equal(name, got, expected):
    if got != expected:
        raise AssertionError(f"{name}: expected {expected}, got {got}")


def test_a_failed_hidden_test_is_named_by_its_label_and_nothing_of_its_data():
    labels = hidden_labels(split_hidden(CELL)[1])
    reply = {"ok": False, "ename": "CheckFailed", "evalue": "f(-5): expected -4, got -5", "at": 6,
             "lines": ["line 6: check_equal(...)"]}
    shown = _shown(hidden_outputs(labels, reply))
    assert "hidden test passed: larger inputs" in shown
    assert "CheckFailed: hidden test failed: negative inputs (its inputs and expected values are not shown)" in shown
    assert "not run after it: zero" in shown
    assert "-5" not in shown and "-4" not in shown and "check_equal" not in shown


def test_every_label_passes_and_a_stop_without_a_line_names_them_all():
    labels = hidden_labels(split_hidden(CELL)[1])
    assert _shown(hidden_outputs(labels, {"ok": True})) == ("hidden test passed: larger inputs\nhidden test passed: "
                                                            "negative inputs\nhidden test passed: zero\n")
    stopped = _shown(hidden_outputs(labels, {"ok": False, "ename": "TimeoutError", "evalue": "notebook time limit"}))
    assert stopped == ("CheckFailed: a hidden test failed (its inputs and expected values are not shown); the hidden "
                       "tests: larger inputs; negative inputs; zero")


def test_unlabelled_hidden_tests_say_passed_or_failed_only():
    assert _shown(hidden_outputs([], {"ok": True})) == "hidden tests: passed\n"
    failed = _shown(hidden_outputs([], {"ok": False, "evalue": "f(3): expected 4, got 5", "at": 2}))
    assert failed == "CheckFailed: a hidden test failed (hidden tests are not shown)"
