"""The trusted checker: a plain Python process, started (sandboxed) before any student code,
that runs the instructor's setup cells and the test cells. It never runs student code: each
name that the solution cells define is, in its namespace, either a plain value fetched from the
student's kernel or a proxy function that asks the grader to call the student's function there
and returns the plain data that comes back (see ``wire``). So a check's verdict, its expected
values and the hidden tests' arguments live where student code cannot reach them.

Protocol: one JSON object per line; requests on stdin, replies on the file descriptor that
was stdout at start (the test cells' own prints are captured separately). Requests:
``{"op": "names", "kinds": {name: [kind, value]}, "ns": key}`` installs proxies and values;
``{"op": "run", "code": str, "ns": key, "save": key}`` runs code (in a saved namespace when
``ns`` is given, saving a copy afterwards when ``save`` is given) and answers ``{"op": "done",
"ok": bool, "stdout": str, "ename": str, "evalue": str, "lines": [...]}``. While code runs, a
proxy writes ``{"op": "call", "name", "args"}`` and reads ``{"op": "result", ...}``.

Run as ``python checker.py`` with this folder on ``sys.path`` (only ``wire`` is imported).
"""
from __future__ import annotations

import builtins
import io
import json
import os
import sys
import traceback

CELL = "<test cell>"


class StudentError(Exception):
    """The student's function raised (or returned something that cannot be graded)."""


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


def make_proxy(name: str, channel: Channel, wire):
    def proxy(*args, **kwargs):
        try:
            payload = wire.encode([list(args), dict(kwargs)])
        except wire.NotPlain as exc:
            raise StudentError(f"{name} cannot be graded outside your kernel: the test passes it {exc}") from None
        channel.send({"op": "call", "name": name, "args": payload})
        reply = channel.receive()
        call = _call_text(name, args, kwargs)
        if reply.get("op") != "result":
            raise StudentError(f"{call}: no answer from your kernel")
        if "timeout" in reply:
            raise StudentError(f"{call} did not finish in time ({reply['timeout']})")
        if "error" in reply:
            raise _exception_for(str(reply["error"])[:80], str(reply.get("message", ""))[:2000], call)
        if "notplain" in reply:
            raise StudentError(f"{call} returned {str(reply['notplain'])[:200]}; only numbers, strings, "
                               "booleans, None, lists, tuples, dicts, arrays and tensors can be graded")
        try:
            return wire.decode(reply.get("value"))
        except (ValueError, TypeError, RecursionError) as exc:
            raise StudentError(f"{call} returned data the grader cannot read ({str(exc)[:100]})") from None
    proxy.__name__ = proxy.__qualname__ = name
    return proxy


class Missing:
    """Stands for a student name whose value cannot be graded; any use fails with the reason."""

    def __init__(self, name: str, why: str):
        self._why = f"{name} is {why}; only plain data can be graded"

    def __getattr__(self, attr):
        raise StudentError(self._why)

    def __repr__(self):
        return "<not gradable>"


def _run(code: str, ns: dict) -> dict:
    out = io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    try:
        exec(compile(code, CELL, "exec"), ns)  # noqa: S102 - the instructor's test code
        return {"op": "done", "ok": True, "stdout": out.getvalue()}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a reply
        lines = [f"line {f.lineno}: {f.line}" for f in traceback.extract_tb(exc.__traceback__)
                 if f.filename == CELL and f.line]
        return {"op": "done", "ok": False, "stdout": out.getvalue(), "ename": type(exc).__name__,
                "evalue": str(exc)[:4000], "lines": lines[-3:]}
    finally:
        sys.stdout, sys.stderr = old


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import wire  # noqa: PLC0415 - from this folder, after the path is set

    channel = Channel()
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
            for name, (kind, value) in req["kinds"].items():
                if kind == "callable":
                    ns[name] = make_proxy(name, channel, wire)
                elif kind == "value":
                    try:
                        ns[name] = wire.decode(value)
                    except (ValueError, TypeError, RecursionError):
                        ns[name] = Missing(name, "malformed data")
                elif kind == "notplain":
                    ns[name] = Missing(name, str(value)[:200])
                else:
                    ns.pop(name, None)
            channel.send({"op": "done", "ok": True, "stdout": ""})
        elif op == "run":
            reply = _run(req["code"], ns)
            if req.get("save"):
                spaces[req["save"]] = dict(ns)
            channel.send(reply)
        elif op == "exit":
            return


if __name__ == "__main__":
    main()
