"""Probes: the part of a test cell that must run in the student's kernel
(``course_lib.checks.in_student_kernel``). In a notebook the decorator changes nothing; in the
trusted checker it sends the function's source (decorators removed) to the student's kernel
and returns only the plain data that comes back. Lesson 00's graded round trip with probes,
attacks included, is in tests/grading/test_sandbox.py."""
import json

import pytest

import course_lib.checks.probe as probe_module
from course_lib.checks import in_student_kernel
from course_tools.grading import checker, wire


def test_in_a_notebook_the_decorator_returns_the_function_itself():
    def f(x):
        return x + 1
    assert probe_module.RUNNER is None
    assert in_student_kernel(f) is f


class FakeChannel:
    """Stands for the grader: records what the checker sends, answers with a canned reply."""

    def __init__(self, reply):
        self.sent, self.reply = [], reply

    def send(self, obj):
        self.sent.append(json.loads(json.dumps(obj)))

    def receive(self):
        return self.reply


CELL = '''
import course_lib.checks as checks

@checks.in_student_kernel
def seconds_of(repeat, *, warmup=1):
    """a probe"""
    return robust_time(lambda: None, warmup=warmup, repeat=repeat)

got = seconds_of(3, warmup=0)
'''


@pytest.fixture
def in_checker():
    """The checker's hook installed as its main loop installs it (and removed afterwards)."""
    channel = FakeChannel({"op": "result", "value": wire.encode(0.25)})
    probe_module.RUNNER = lambda fn: checker.make_probe(fn, channel, wire)
    yield channel
    probe_module.RUNNER = None


def test_in_the_checker_a_probe_runs_its_source_in_the_kernel_and_returns_plain_data(in_checker):
    ns = {"__name__": "__main__"}
    reply = checker._run(CELL, ns)
    assert reply["ok"], reply
    assert ns["got"] == 0.25 and type(ns["got"]) is float
    (request,) = in_checker.sent
    assert request["op"] == "probe" and request["name"] == "seconds_of"
    assert "in_student_kernel" not in request["source"]          # decorators removed
    assert request["source"].startswith("def seconds_of(repeat, *, warmup=1):")
    compile(request["source"], "<probe>", "exec")
    assert wire.decode(request["args"]) == [[3], {"warmup": 0}]


def test_a_probe_that_raises_or_returns_no_plain_data_fails_the_check_with_a_reason(in_checker):
    in_checker.reply = {"op": "result", "error": "ZeroDivisionError", "message": "division by zero"}
    reply = checker._run(CELL, {"__name__": "__main__"})
    assert not reply["ok"] and reply["ename"] == "ZeroDivisionError"
    assert "seconds_of(3, warmup=0) raised ZeroDivisionError" in reply["evalue"]
    in_checker.reply = {"op": "result", "notplain": "an object of type Model"}
    reply = checker._run(CELL, {"__name__": "__main__"})
    assert not reply["ok"] and "returned an object of type Model" in reply["evalue"]


def test_a_probe_cannot_be_given_objects_that_do_not_cross(in_checker):
    code = CELL.replace("got = seconds_of(3, warmup=0)", "got = seconds_of(object())")
    reply = checker._run(code, {"__name__": "__main__"})
    assert not reply["ok"] and "cannot be graded outside your kernel" in reply["evalue"]
    assert in_checker.sent == []


def test_a_probe_must_be_a_function_defined_with_def(in_checker):
    reply = checker._run("import course_lib.checks as c\nf = c.in_student_kernel(lambda: 1)\n",
                         {"__name__": "__main__"})
    assert not reply["ok"] and "defined with def" in reply["evalue"]
