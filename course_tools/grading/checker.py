"""The trusted checker: a plain Python process, started (sandboxed) before any student code,
that runs the instructor's setup cells and the test cells. Of the student's code it runs only
the source of Numba CUDA kernels and device functions that passed ``kernel_source``'s
whitelist (code that can reach nothing but its arguments, its own variables, ``cuda.*``,
``math.*``, Numba types and the lesson's constants), compiled in a namespace of its own with the
checker's own ``numba.cuda``; nothing else of the student's runs here. Each other name that the
solution cells define is, in its namespace, either a plain value fetched from the student's
kernel or a proxy function that asks the grader to call the student's function there and
returns the plain data that comes back (see ``wire``); a proxy's ``__course_source__`` holds the
function's source text as the student's kernel reported it (untrusted text, or None). So a
check's verdict, its expected values, the hidden tests' arguments and a kernel's access counts
live where student code cannot reach them.

Protocol: one JSON object per line; requests on stdin, replies on the file descriptor that
was stdout at start (the test cells' own prints are captured separately). Requests:
``{"op": "names", "kinds": {name: [kind, value]}, "ns": key}`` installs proxies, values and
rebuilt kernels (a kernel that fails the whitelist is installed as a stand-in whose every use
fails with the reason); ``{"op": "run", "code": str, "ns": key, "save": key}`` runs code (in a
saved namespace when ``ns`` is given, saving a copy afterwards when ``save`` is given) and
answers ``{"op": "done", "ok": bool, "stdout": str, "ename": str, "evalue": str, "lines": [...],
"at": line}`` (``lines``: the code's innermost lines in the traceback; ``at``: the number of the
top-level line of the code that failed, which names the hidden test that failed).
While code runs, a proxy writes ``{"op": "call", "name", "args"}`` and reads
``{"op": "result", ...}``; a probe (a test cell's ``@in_student_kernel`` function, see
``course_lib.checks.probe``) writes ``{"op": "probe", "name", "source", "args"}``: the grader
defines that instructor code in the student's kernel, calls it there, and answers the same way.

Run as ``python checker.py`` with this folder on ``sys.path`` (only ``wire`` and
``kernel_source`` are imported); ``python checker.py --template`` runs the template of one
grading slot (:func:`serve_checkers`), which forks a fresh checker per submission.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import io
import json
import linecache
import os
import sys
import textwrap
import time
import traceback

CELL = "<test cell>"
OUTPUT_CHARS = 1_000_000   # characters of a test cell's stdout and stderr kept in a reply


class StudentError(Exception):
    """The student's function raised (or returned something that cannot be graded)."""


class NotAnswered(StudentError):
    """The student's function or kernel still holds the release's stub (``raise NotImplementedError()``)."""


def not_answered(name: str) -> NotAnswered:
    """The failure for an exercise ``name`` not answered yet, worded as the student's notebook words it."""
    if __package__:
        from .gpu_kernels.source_whitelist import unanswered_text
    else:   # run as checker.py: gpu_kernels/ is on sys.path
        from source_whitelist import unanswered_text
    return NotAnswered(unanswered_text(name))


class Channel:
    def __init__(self):
        self.out = os.fdopen(os.dup(1), "w", buffering=1)
        self.inp = sys.stdin
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)       # stray C-level writes never reach the protocol

    def send(self, obj) -> None:
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()

    def receive(self) -> dict:
        line = self.inp.readline()
        if not line:
            raise SystemExit(0)
        return json.loads(line)


def _exception_for(name: str, message: str, call: str) -> BaseException:
    """An exception of the student's built-in type (so check_raises works), else StudentError."""
    text = f"{call} raised {name}: {message}" if message else f"{call} raised {name}"
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        try:
            return cls(text)
        except Exception:  # noqa: BLE001 - exceptions with odd constructors
            pass
    return StudentError(text if name.isidentifier() and len(name) < 60 else f"{call} raised an exception")


def _call_text(name: str, args, kwargs) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = ", ".join(parts)
    return f"{name}({text if len(text) < 120 else text[:117] + '...'})"


def _ask(channel: Channel, wire, request: dict, call: str):
    """Send one call to the student's kernel (``request`` without its arguments' reply) and
    return the decoded plain data that comes back, or raise what the student's code raised."""
    channel.send(request)
    reply = channel.receive()
    if reply.get("op") != "result":
        raise StudentError(f"{call}: no answer from your kernel")
    if "timeout" in reply:
        raise StudentError(f"{call} did not finish in time ({reply['timeout']})")
    unanswered = reply.get("unanswered")
    if "error" in reply and isinstance(unanswered, str) and unanswered.isidentifier() and len(unanswered) < 80:
        raise not_answered(unanswered)   # the stub of the student's function (or one it calls) raised
    if "error" in reply:
        raise _exception_for(str(reply["error"])[:80], str(reply.get("message", ""))[:2000], call)
    if "notplain" in reply:
        raise StudentError(f"{call} returned {str(reply['notplain'])[:200]}; only numbers, strings, "
                           "booleans, None, lists, tuples, dicts, arrays and tensors can be graded")
    try:
        return wire.decode(reply.get("value"))
    except (ValueError, TypeError, RecursionError) as exc:
        raise StudentError(f"{call} returned data the grader cannot read ({str(exc)[:100]})") from None


def _payload(wire, name: str, args, kwargs) -> str:
    try:
        return wire.encode([list(args), dict(kwargs)])
    except wire.NotPlain as exc:
        raise StudentError(f"{name} cannot be graded outside your kernel: the test passes it {exc}") from None


def make_proxy(name: str, channel: Channel, wire, source=None):
    def proxy(*args, **kwargs):
        request = {"op": "call", "name": name, "args": _payload(wire, name, args, kwargs)}
        return _ask(channel, wire, request, _call_text(name, args, kwargs))
    proxy.__name__ = proxy.__qualname__ = name
    proxy.__course_source__ = source if type(source) is str else None
    return proxy


def probe_source(fn) -> str:
    """The source of a test cell's ``@in_student_kernel`` function, its decorators removed."""
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError) as exc:
        raise TypeError(f"in_student_kernel needs a function defined in a test cell ({exc})") from None
    if not isinstance(node, ast.FunctionDef):
        raise TypeError("in_student_kernel needs a function defined with def")
    node.decorator_list = []
    return ast.unparse(node)


def make_probe(fn, channel: Channel, wire):
    """The checker's stand-in for a probe: it runs ``fn``'s source in the student's kernel."""
    name, source = fn.__name__, probe_source(fn)

    def probe(*args, **kwargs):
        request = {"op": "probe", "name": name, "source": source, "args": _payload(wire, name, args, kwargs)}
        return _ask(channel, wire, request, _call_text(name, args, kwargs))
    probe.__name__ = probe.__qualname__ = name
    return probe


class Missing:
    """Stands for a student name whose value cannot be graded; any use fails with the reason
    (``text``, or one made of ``why``) as an ``error`` (StudentError, or NotAnswered)."""

    def __init__(self, name: str, why: str, text: str = "", error: type = StudentError):
        self._why = text or f"{name} is {why}; only plain data can be graded"
        self._error = error

    def __getattr__(self, attr):
        raise self._error(self._why)

    def __getitem__(self, key):
        raise self._error(self._why)

    def __call__(self, *args, **kwargs):
        raise self._error(self._why)

    def __repr__(self):
        return "<not gradable>"


def install(ns: dict, kinds: dict, channel: Channel, wire, kernel_source) -> None:
    """Put the student's names into ``ns``: values, proxies, then the rebuilt kernels."""
    for name, (kind, value) in kinds.items():
        if kind == "callable":
            ns[name] = make_proxy(name, channel, wire, value)
        elif kind == "value":
            try:
                ns[name] = wire.decode(value)
            except (ValueError, TypeError, RecursionError):
                ns[name] = Missing(name, "malformed data")
        elif kind == "notplain":
            ns[name] = Missing(name, str(value)[:200])
        elif kind != "gpu_kernel":
            ns.pop(name, None)
    for name, built in kernel_source.Builder(kinds, ns, wire.decode).all().items():
        if isinstance(built, kernel_source.Refused):
            error = NotAnswered if isinstance(built, kernel_source.Unanswered) else StudentError
            built = Missing(name, "", str(built)[:2000], error)
        ns[name] = built


class _CappedText(io.TextIOBase):
    """A text sink that keeps the first ``cap`` characters written and drops the rest (student
    code that prints in the checker, e.g. ``print`` in a simulated kernel, cannot grow a reply)."""

    def __init__(self, cap: int = OUTPUT_CHARS):
        self.parts, self.size, self.cap, self.dropped = [], 0, cap, 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = self.cap - self.size
        if room > 0:
            self.parts.append(text[:room])
            self.size += min(len(text), room)
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        tail = f"\n[{self.dropped} more characters of output dropped]\n" if self.dropped else ""
        return "".join(self.parts) + tail


def _run(code: str, ns: dict) -> dict:
    linecache.cache[CELL] = (len(code), None, code.splitlines(True), CELL)  # probes read their source
    out = _CappedText()
    old = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    try:
        exec(compile(code, CELL, "exec"), ns)  # noqa: S102 - the instructor's test code
        return {"op": "done", "ok": True, "stdout": out.getvalue()}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a reply
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == CELL]
        lines = [f"line {f.lineno}: {f.line}" for f in frames if f.line]
        return {"op": "done", "ok": False, "stdout": out.getvalue(), "ename": type(exc).__name__,
                "evalue": str(exc)[:4000], "lines": lines[-3:], "at": frames[0].lineno if frames else None}
    finally:
        sys.stdout, sys.stderr = old


def _non_dumpable() -> None:
    """Linux ``prctl(PR_SET_DUMPABLE, 0)``: processes of the same user (workers that a check
    starts with student code) cannot read this one's memory, environment or pipes through
    ``/proc`` or attach to it."""
    if sys.platform.startswith("linux"):
        import ctypes  # noqa: PLC0415

        try:
            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        except (OSError, AttributeError):
            pass


def _run_in(spaces: dict, key: str, code: str) -> dict:
    """Run ``code`` in the namespace ``key`` of ``spaces`` ("": the live one). A saved namespace
    (a test cell's, for its hidden part) is run as the live one, its contents swapped in for the
    run and the live contents put back after: the functions the cell defined look their globals
    up in the live namespace, so they find what the cell saw (its kernels, its helpers), not what
    later cells installed under the same names."""
    live = spaces[""]
    if not key:
        return _run(code, live)
    current = dict(live)
    live.clear()
    live.update(spaces[key])
    try:
        return _run(code, live)
    finally:
        spaces[key] = dict(live)
        live.clear()
        live.update(current)


def _others() -> list[int]:
    """The processes of this sandbox's user but this one (bubblewrap's own init, pid 1, is root's)."""
    me, uid, pids = os.getpid(), os.getuid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, me):
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


def _sweep() -> bool:
    """Kill whatever a served checker left running in the sandbox; True when nothing was left."""
    left = _others()
    for _ in range(500):
        pids = _others()
        if not pids:
            return not left
        for pid in pids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.01)
    return False


def serve_checkers(channel: Channel) -> None:
    """The template (``--template``): a checker that has imported the lesson's modules once and
    forks one fresh checker per submission, so no submission pays the imports (``torch``: about
    3 s of CPU on the course's 2-core machine). It runs no test and nothing of a student's; each
    fork starts from this same clean state and returns from here to serve one submission. After a
    served checker exits, whatever it left in the sandbox is killed, and the grader is told
    whether it ended clean: exit status 0 (a checker that started worker processes, which run
    student code, exits with 3) and nothing left behind. Requests: ``{"op": "preload", "code"}``
    (import statements, run once), ``{"op": "fork"}`` (answered by the new checker's
    ``ready``, then, when it has ended, ``{"op": "idle", "clean": bool}``), ``{"op": "exit"}``.
    With ``--plain`` (no sandbox: the build's round trip, the instructor's own code) nothing is
    swept here: the grader kills each checker's process tree from outside (``CheckerProcess.finish``)
    and this reports ``clean`` once it has reaped the checker."""
    channel.send({"op": "template"})
    while True:
        req = channel.receive()
        op = req.get("op")
        if op == "preload":
            for line in str(req.get("code", "")).splitlines():   # one import statement per line
                try:
                    exec(compile(line, "<preload>", "exec"), {"__name__": "__preload__"})  # noqa: S102
                except (Exception, SystemExit):  # noqa: BLE001 - the served checker runs the setup cells and reports
                    pass
            channel.send({"op": "done", "ok": True})
        elif op == "fork":
            pid = os.fork()
            if pid == 0:
                return
            _, status = os.waitpid(pid, 0)
            # --plain (no sandbox): the grader killed the checker's tree from outside; this user's
            # other processes are the machine's, not the sandbox's, and are never swept
            channel.send({"op": "idle", "clean": True if "--plain" in sys.argv else _sweep() and status == 0})
        else:
            raise SystemExit(0)


def _exit_status() -> int:
    """0, or 3 when this checker started worker processes (they ran student code in the sandbox)."""
    server = sys.modules.get("course_lib.parallel.fork_server")
    return 3 if server is not None and getattr(server, "_SERVER", None) is not None else 0


def main() -> None:
    _non_dumpable()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [here, os.path.join(here, "gpu_kernels")]
    import kernel_source  # noqa: PLC0415 - from gpu_kernels/, after the path is set
    import wire  # noqa: PLC0415

    channel = Channel()
    if "--template" in sys.argv:
        try:
            serve_checkers(channel)
        except SystemExit:   # its owner is gone or done with it: no interpreter finalization
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    spaces = {"": {"__name__": "__main__", "__builtins__": builtins}}
    channel.send({"op": "ready"})
    while True:
        req = channel.receive()
        op = req.get("op")
        ns = spaces.get(req.get("ns") or "")
        if ns is None:
            channel.send({"op": "done", "ok": False, "ename": "KeyError", "evalue": "unknown namespace"})
            continue
        if op == "names":
            install(ns, req["kinds"], channel, wire, kernel_source)
            channel.send({"op": "done", "ok": True, "stdout": ""})
        elif op == "run":
            probes = sys.modules.get("course_lib.checks.probe")   # imported by the setup cells
            if probes is not None:
                probes.RUNNER = lambda fn: make_probe(fn, channel, wire)
            reply = _run_in(spaces, req.get("ns") or "", req["code"])
            if req.get("save"):
                spaces[req["save"]] = dict(ns)
            channel.send(reply)
        elif op == "exit":
            sys.stdout.flush()
            os._exit(_exit_status())


if __name__ == "__main__":
    main()
