"""What the student's kernel runs before any of the student's cells (``HELPERS``): ``wire``'s
source, so values cross as plain data both ways, and the helpers that answer the grader and the
checker there (``KERNEL_HELPERS``). All of it runs under the student's control; the trust lies
only in ``wire.decode`` on the checker's side.

"Kernel" alone here, as in ``wire``, means the student's Jupyter kernel; a GPU kernel is always called one. The
student's names are described by ``_course_names`` (in the student's kernel) as ``[kind,
payload]``: ``value`` (encoded data), ``callable`` (the function's source text when it is a plain
function defined in the notebook, else None; the checker calls it through a proxy),
``gpu_kernel`` (a Numba CUDA kernel or device function: ``{"source", "device", "deps"}``, its
source text from ``py_func`` with the decorator lines, whether it is a device function, and the
student's names it uses that are GPU kernels or numbers, in the same form; a Triton kernel:
``{"source", "device": False, "lang": "triton"}``; ``kernel_source`` checks and rebuilds it in
the checker), ``notplain`` (why it cannot cross) or ``missing``. A call of a student's
function (``_course_call``) answers its value, or the error it raised; an error raised by the
release's stub (``raise NotImplementedError()`` as the innermost line, in a notebook cell) also
names that function (``unanswered``), which the checker reports as not answered yet.
"""
from __future__ import annotations

from pathlib import Path

from . import wire

STREAM_CHUNK_CHARS = 2**17  # characters of printed text the kernel sends per message (see _course_chunk_streams)

# Run in the student's kernel after wire's source: call one of the student's names with decoded
# arguments, output discarded, and print one line "<token><base64 JSON reply>".
KERNEL_HELPERS = '''
def _course_reply(token, reply):
    import base64 as _b64, json as _json, sys as _sys
    _sys.__stdout__.flush()
    print(token + _b64.b64encode(_json.dumps(reply).encode()).decode(), flush=True)

def _course_call(token, name, payload, fn=None):
    import contextlib as _ctx, io as _io, traceback as _tb
    sink = _io.StringIO()
    try:
        args, kwargs = decode(payload)
        fn = get_ipython().user_ns[name] if fn is None else fn
        with _ctx.redirect_stdout(sink), _ctx.redirect_stderr(sink):
            result = fn(*args, **kwargs)
        reply = {"value": encode(result)}
    except NotPlain as exc:
        reply = {"notplain": str(exc)}
    except BaseException as exc:
        frames = [f for f in _tb.extract_tb(exc.__traceback__) if not f.filename.startswith("<course")]
        reply = {"error": type(exc).__name__, "message": str(exc)[:2000],
                 "traceback": "".join(_tb.format_list(frames[-8:]))[-4000:]}
        last = frames[-1] if frames and isinstance(exc, NotImplementedError) else None
        stub = (last.line or "").strip() if last else ""
        in_a_cell = last is not None and ("ipykernel_" in last.filename or last.filename.startswith("<ipython-input"))
        if in_a_cell and (stub == "raise NotImplementedError" or stub.startswith("raise NotImplementedError(")):
            reply["unanswered"] = last.name   # the release's stub in a cell: this function is not answered yet
    _course_reply(token, reply)

def _course_probe(token, name, source, payload):
    # a test cell's @in_student_kernel function (the instructor's code, sent by the checker):
    # defined with the notebook's names as its globals, called like a student's function
    holder = {}
    try:
        exec(compile(source, "<course probe>", "exec"), get_ipython().user_ns, holder)
        fn = holder[name]
    except BaseException as exc:
        _course_reply(token, {"error": type(exc).__name__, "message": str(exc)[:2000]})
        return
    _course_call(token, name, payload, fn)

def _course_source(fn):
    import inspect as _inspect, textwrap as _textwrap
    try:
        return _textwrap.dedent(_inspect.getsource(fn))
    except Exception:
        return None

def _course_jit(obj):
    if str(getattr(type(obj), "__module__", "")).startswith("triton.runtime"):  # lesson 14: triton_source
        fn = getattr(obj, "fn", None)
        return {"source": _course_source(fn), "device": False, "lang": "triton"} if callable(fn) else None
    if not str(getattr(type(obj), "__module__", "")).startswith("numba.cuda"):
        return None
    fn = getattr(obj, "py_func", None)
    if not callable(fn):
        return None
    device = getattr(obj, "_device", None)
    if device is None:
        device = (getattr(obj, "targetoptions", None) or {}).get("device")
    return {"source": _course_source(fn), "device": bool(device)}

def _course_gpu_kernel(ns, payload):
    import ast as _ast
    deps, todo = {}, [payload["source"]]
    while todo and len(deps) < 64:
        try:
            used = sorted({n.id for n in _ast.walk(_ast.parse(todo.pop() or "")) if isinstance(n, _ast.Name)})
        except Exception:
            continue
        for name in used:
            if name in deps or name not in ns:
                continue
            value, jit = ns[name], _course_jit(ns[name])
            if jit is not None:
                deps[name] = ["gpu_kernel", jit]
                todo.append(jit["source"])
            elif type(value) in (bool, int, float, tuple):
                try:
                    deps[name] = ["value", encode(value)]
                except NotPlain:
                    pass
    payload["deps"] = deps
    return payload

def _course_names(token, names):
    import inspect as _inspect
    ns, kinds = get_ipython().user_ns, {}
    for name in names:
        jit = _course_jit(ns.get(name)) if name in ns else None
        if name not in ns:
            kinds[name] = ["missing", None]
        elif jit is not None:
            kinds[name] = ["gpu_kernel", _course_gpu_kernel(ns, jit)]
        elif callable(ns[name]):
            fn = ns[name]
            mine = _inspect.isfunction(fn) and getattr(fn, "__module__", None) == "__main__"
            kinds[name] = ["callable", _course_source(fn) if mine else None]
        else:
            try:
                kinds[name] = ["value", encode(ns[name])]
            except NotPlain as exc:
                kinds[name] = ["notplain", str(exc)]
    _course_reply(token, kinds)

def _course_chunk_streams(chunk=STREAM_CHUNK_CHARS):
    # ipykernel sends whatever a stream buffered as one message; the grader's sockets drop a
    # message longer than any output it keeps (and with it the cell's reply), so one
    # print("\\n".join(str(i) for i in range(10**6))) would look like a hung cell. Each buffer is
    # sent in pieces of `chunk` characters instead (at most 6 bytes a character once in JSON).
    # (IPython swaps `write` around every cell, so the split is made where buffers are emptied.)
    import sys as _sys
    for stream in (_sys.stdout, _sys.stderr):
        buffers = getattr(stream, "_flush_buffers", None)
        if buffers is None or getattr(buffers, "_course_chunked", False):
            continue
        def pieces(buffers=buffers):
            for parent, data in buffers():
                for start in range(0, max(len(data), 1), chunk):
                    yield parent, data[start:start + chunk]
        pieces._course_chunked = True
        stream._flush_buffers = pieces

_course_chunk_streams()
'''.replace("STREAM_CHUNK_CHARS", str(STREAM_CHUNK_CHARS))

_WIRE_SOURCE = "\n".join(ln for ln in Path(wire.__file__).read_text().splitlines()
                         if not ln.startswith("from __future__"))
# the cell that defines them in the student's kernel, as the module _course_wire
HELPERS = (f"import types as _t\n_course_wire = _t.ModuleType('_course_wire')\n"
           f"exec(compile({(_WIRE_SOURCE + KERNEL_HELPERS)!r}, '<course helpers>', 'exec'), "
           "_course_wire.__dict__)\n"
           "del _t\n")
