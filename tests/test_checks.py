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
