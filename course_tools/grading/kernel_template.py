"""The student's kernel template, run in a slot's kernel sandbox as the slot's sandbox user: it
imports ipykernel and the modules the lesson's setup cells import once, then forks one IPython
kernel per submission, so no submission pays those imports (``torch``, numpy, pyplot and
ipykernel: about 3.5 s of CPU per kernel on the course's 2-core machine). It runs no student code
itself; each kernel starts from the same state, the one this process reached before its first fork.

Spoken to over its stdin and stdout, one JSON object per line:
``{"op": "preload", "code"}`` (import statements, one per line, run once; answered ``done``),
``{"op": "fork", "connection"}`` (answered ``forked``; when that kernel has ended, ``ended`` with
its exit code, negative for a signal, then ``idle`` with ``clean``), ``{"op": "exit"}``.

What keeps one submission's kernel from reaching the next (the grader does the rest from outside:
it kills every process of the sandbox but this one and empties the writable folders before the
next fork, see ``student_kernel.SandboxKernel``):

* this process is not dumpable, so processes of the same user (the kernels) can neither read nor
  write its memory, nor reach its pipes through ``/proc``, nor attach to it;
* it ignores the signals a process may send that would otherwise end or stop it short of
  SIGKILL and SIGSTOP (those end the sandbox, or leave it without an answer: the grader then
  starts a fresh one);
* a kernel closes the control pipes before anything else runs in it and starts a session of its
  own;
* after a kernel ends, what it left in ``/dev/shm`` and the sandbox's System V IPC is removed;
  ``clean`` is false when something could not be.

Run by path (``python -u kernel_template.py``), not imported: it imports nothing of the course.
``--folder PATH`` (no sandbox: the build's round trip, the instructor's own code): the kernels
run in PATH rather than the sandbox's ``/submission``, and ``/dev/shm`` and System V IPC, the
machine's own then, are left alone.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

SUBMISSION = "/submission"    # where the sandbox shows the submission (sandbox.INSIDE_SUBMISSION)
PLAIN = "--folder" in sys.argv   # no sandbox: the kernels' folder given, the machine's IPC not ours
if PLAIN:
    SUBMISSION = sys.argv[sys.argv.index("--folder") + 1]
IGNORED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
           signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF)
IPC_RMID = 0
LIBC = ctypes.CDLL(None, use_errno=True)


def _dumpable(flag: int) -> None:
    """Linux ``prctl(PR_SET_DUMPABLE, flag)``."""
    LIBC.prctl(4, flag, 0, 0, 0)


CONTROL = None   # the pipe the grader reads (the process's stdout when it started; see main)


def _send(obj: dict) -> None:
    CONTROL.write(json.dumps(obj) + "\n")
    CONTROL.flush()


def _preload(code: str) -> None:
    """Run each import statement (a failing one is skipped: the kernel's own cell reports it)."""
    for line in code.splitlines():
        try:
            exec(compile(line, "<preload>", "exec"), {"__name__": "__preload__"})  # noqa: S102
        except (Exception, SystemExit):  # noqa: BLE001
            pass


def _become_kernel(connection: str) -> None:
    """In the forked child: drop the template's pipes, signals and state, then run the kernel as
    ``python -m ipykernel_launcher -f connection`` would, in the submission folder; never returns."""
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)    # the control pipes: gone before anything of the student's runs
        os.dup2(devnull, 1)
        os.close(devnull)
        os.close(CONTROL.fileno())
        os.setsid()
        for sig in IGNORED:
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _dumpable(1)           # the student's own processes may look at each other, as in any kernel
        os.chdir(SUBMISSION)
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path[:] = [p for p in sys.path if p != here]
        sys.argv = ["ipykernel_launcher", "-f", connection, "--HistoryManager.enabled=False"]
        from ipykernel import kernelapp  # noqa: PLC0415 - preloaded by the template

        kernelapp.launch_new_instance()
        code = 0
    finally:
        os._exit(code)


def _clean_ipc() -> bool:
    """Remove what the ended kernel left in ``/dev/shm`` and the System V IPC of this sandbox;
    True when nothing is left."""
    clean = True
    try:
        for name in os.listdir("/dev/shm"):
            path = os.path.join("/dev/shm", name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    import shutil  # noqa: PLC0415 - rare

                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError:
                clean = False
    except OSError:
        pass
    for kind, remove in (("shm", LIBC.shmctl), ("msg", LIBC.msgctl), ("sem", LIBC.semctl)):
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                ids = [int(line.split()[1]) for line in fh.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ident in ids:
            if kind == "sem":
                remove(ident, 0, IPC_RMID)
            else:
                remove(ident, IPC_RMID, None)
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                clean = clean and len([line for line in fh.readlines()[1:] if line.strip()]) == 0
        except OSError:
            pass
    return clean


def _wait_unless_orphaned(pid: int) -> int:
    """(No sandbox.) The kernel's wait status, once it has ended; but when the grader's end of the
    control pipe closes meanwhile (the grader died: no sandbox ends with it), the kernel's process
    group is killed and this process exits."""
    import select  # noqa: PLC0415 - only without a sandbox

    hangup = select.poll()
    hangup.register(0, select.POLLHUP)   # reported on its own: the grader's requests are not read here
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        if hangup.poll(500):
            try:
                os.killpg(pid, signal.SIGKILL)   # the kernel leads its own session
            except OSError:
                pass
            os._exit(0)


def main() -> None:
    global CONTROL
    _dumpable(0)
    # the replies go out on a copy of stdout; stdout itself becomes stderr, so what an import
    # prints cannot reach the grader as a reply
    CONTROL = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for sig in IGNORED:
        signal.signal(sig, signal.SIG_IGN)
    # what ipykernel would set at start: pyplot, imported here, then draws inline in every kernel
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    _send({"op": "template"})
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            return
        op = req.get("op") if isinstance(req, dict) else None
        if op == "preload":
            _preload(str(req.get("code", "")) + "\nfrom ipykernel import kernelapp\nimport ipykernel.ipkernel")
            _send({"op": "done"})
        elif op == "fork":
            connection = str(req.get("connection", ""))
            pid = os.fork()
            if pid == 0:
                _become_kernel(connection)
            _send({"op": "forked", "pid": pid})
            status = _wait_unless_orphaned(pid) if PLAIN else os.waitpid(pid, 0)[1]
            _send({"op": "ended", "code": os.waitstatus_to_exitcode(status)})
            _send({"op": "idle", "clean": True if PLAIN else _clean_ipc()})
        else:
            return


if __name__ == "__main__":
    main()
    # its owner is gone or done with it: no interpreter finalization (about 1 CPU-s and 2 s with
    # torch imported); in the sandbox whatever is left goes with it
    sys.stderr.flush()
    os._exit(0)
