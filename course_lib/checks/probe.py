"""Marking the part of a test that must run in the student's own kernel (a probe).

Some tests cannot hand the student's function plain data: they patch a module around it
(``mock.patch``), pass it a callable or a model, or inspect an object it changed in place. Such
a test wraps that part in a function decorated with :func:`in_student_kernel`, which returns
only plain data (numbers, strings, lists, arrays, tensors); the checks on that data stay
outside it::

    @in_student_kernel
    def device_when(available):
        with mock.patch("torch.cuda.is_available", return_value=available):
            return pick_device()

    check_equal("pick_device() with a GPU", device_when(True), torch.device("cuda"))

In a notebook (the student's own run, nbval, ``course build``) the decorator changes nothing.
When the grader's trusted checker runs the test cell, it sets :data:`RUNNER`; the decorated
function's source (without the decorator) is then defined and called in the student's kernel,
where the notebook's names are, and only its plain return value comes back to the checker. So
the verdict and the expected values stay where student code cannot reach them. A probe uses
only its arguments and the notebook's names (not variables of the test cell).
"""
from __future__ import annotations

RUNNER = None  # set by the grader's checker process: takes the function, returns its stand-in


def in_student_kernel(fn):
    """``fn`` itself, or, inside the grader's checker, a stand-in that runs ``fn`` in the
    student's kernel and returns its (plain data) result."""
    return fn if RUNNER is None else RUNNER(fn)
