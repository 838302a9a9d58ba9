import pytest

from course_lib import checks


def test_passing_checks_print_ok(capsys):
    checks.check_close("x", 1.0000001, 1.0)
    checks.check_equal("y", (1, 2), (1, 2))
    checks.check_in("z", "a", ["a", "b"])
    checks.check_true("w", True, "true", True)
    checks.check_raises("v", lambda: 1 / 0, ZeroDivisionError)
    out, err = capsys.readouterr()
    assert out.count("ok:") == 5 and err == ""


@pytest.mark.parametrize("call, words", [
    (lambda: checks.check_close("speed", 2.0, 1.0, rtol=0.1), ["speed", "expected 1", "got 2"]),
    (lambda: checks.check_close("speed", None, 1.0), ["forget to `return`"]),
    (lambda: checks.check_close("speed", "fast", 1.0), ["a number close to 1", "'fast'"]),
    (lambda: checks.check_close("speed", True, 1.0), ["a number"]),
    (lambda: checks.check_equal("shape", (2, 3), (3, 2), hint="transpose"), ["(3, 2)", "(2, 3)", "Hint: transpose"]),
    (lambda: checks.check_in("kind", "x", ["a", "b"]), ["one of 'a', 'b'", "'x'"]),
    (lambda: checks.check_true("fast", False, "under 1 s", 3.0), ["under 1 s", "got 3"]),
    (lambda: checks.check_raises("err", lambda: 1, KeyError), ["KeyError", "normal return"]),
    (lambda: checks.check_raises("err", lambda: [][1], KeyError), ["IndexError"]),
])
def test_failures_say_what_was_expected_and_what_came_back(call, words, capsys):
    with pytest.raises(AssertionError) as info:
        call()
    for word in words:
        assert word in str(info.value)
    assert capsys.readouterr().err == ""


def test_array_close_names_the_first_mismatch_and_the_expected_values(capsys):
    import numpy as np

    from course_lib.checks.core import check_array_close

    expected = np.random.default_rng(3).random(256)
    check_array_close("same", expected.copy(), expected)
    got = expected.copy()
    got[192:200] = 0.0                       # the last block was never launched
    with pytest.raises(AssertionError) as info:
        check_array_close("axpy", got, expected, hint="enough blocks?")
    message = str(info.value)
    assert "8 of 256 elements differ" in message
    assert f"[192] expected {expected[192]:.6g} got 0" in message
    assert f"[193] expected {expected[193]:.6g}" in message
    assert f"Expected values start [{expected[0]:.6g}" in message and "Hint: enough blocks?" in message
    with pytest.raises(AssertionError, match=r"\[1, 0\] expected 3 got 9"):
        check_array_close("matrix", np.array([[1.0, 2.0], [9.0, 4.0]]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    with pytest.raises(AssertionError, match=r"shape \(2, 2\).*got shape \(4,\)"):
        check_array_close("shape", np.zeros(4), np.zeros((2, 2)))
    with pytest.raises(AssertionError, match="forget to `return`"):
        check_array_close("none", None, np.zeros(3))
    with pytest.raises(AssertionError, match="expected nan got"):
        check_array_close("nan", np.zeros(1), np.array([np.nan]))
    out, err = capsys.readouterr()
    assert out.count("ok:") == 1 and err == ""


def test_a_failed_check_in_a_notebook_shows_its_message_first_and_no_library_frames():
    """What a student sees in JupyterLab when a test cell fails: the message, then their line;
    an exercise not answered yet (the release's stub raised) says so in one line."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from course_lib.checks import check_equal\n"
                                          "def double(x):\n    return x + 2\n"),
                nbformat.v4.new_code_cell("check_equal('double(3)', double(3), 6, hint='multiply')"),
                nbformat.v4.new_code_cell("1 / 0"),
                nbformat.v4.new_code_cell("def triple(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"),
                nbformat.v4.new_code_cell("check_equal('triple(3)', triple(3), 9)"),
                nbformat.v4.new_code_cell("import numbers\nnumbers.Complex.real.fget(1)")]
    client = NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True)
    try:
        client.execute()
    except CellExecutionError:  # pragma: no cover - allow_errors keeps going
        pass
    error = nb.cells[1].outputs[-1]
    assert error["output_type"] == "error" and error["ename"] == "CheckFailed"
    assert error["traceback"] == ["CheckFailed: double(3): expected 6, got 5. Hint: multiply",
                                  "  your cell, line 1: check_equal('double(3)', double(3), 6, hint='multiply')"]
    other = nb.cells[2].outputs[-1]   # any other error keeps IPython's whole traceback
    assert other["ename"] == "ZeroDivisionError" and len(other["traceback"]) > 2
    stub = nb.cells[4].outputs[-1]    # the release's stub reached: one line saying so, then the test's line
    assert stub["traceback"] == [("NotAnswered: triple is not answered yet: write it where it says # YOUR CODE HERE, "
                                  "then run that cell again"),
                                 "  your cell, line 1: check_equal('triple(3)', triple(3), 9)"]
    library = nb.cells[5].outputs[-1]   # a library's NotImplementedError is not the student's stub
    assert library["ename"] == "NotImplementedError" and len(library["traceback"]) > 2


def test_the_checks_import_no_ipython_outside_a_shell():
    """A worker process or the grader's checker imports ``course_lib.checks`` without IPython
    (0.2 s of CPU in every worker of lessons 10, 11 and 13); inside a kernel the failure display
    is installed as above."""
    import subprocess
    import sys

    code = "import sys, course_lib.checks; print('IPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
