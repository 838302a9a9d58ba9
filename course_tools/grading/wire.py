"""Plain data across the wall between the student's kernel and the trusted checker.

Only these kinds of values cross: None, bool, int, float, str, and lists, tuples, dicts and
sets of them; NumPy arrays (as ``.npy`` bytes, read back with ``allow_pickle=False``, never of
dtype object); NumPy scalars (as Python numbers); torch tensors (as arrays, rebuilt as CPU
tensors where torch is importable); tensors on the ``meta`` device (shape and dtype only, they
hold no values; rebuilt as meta tensors); ``torch.device`` and ``torch.dtype`` (by name); NumPy
scalar types and dtypes (by name); instances of dataclasses defined in ``course_lib`` (by the
class's module and qualified name and the values of its ``__init__`` fields, each of them plain
data again). Anything else raises :class:`NotPlain`. Decoding builds fresh objects of exactly
these types from JSON, so a value that arrives behaves like the built-in it claims to be (no
custom ``__eq__``, ``__float__`` or ``__bool__`` survives the trip). A dataclass instance is
rebuilt by calling its class's own constructor with the decoded fields, and only when the class
is found, by that name, in a ``course_lib`` module that the receiving process has already
imported (the sender never makes it import anything), is a dataclass defined there under that
name, and the fields sent are exactly the ones its constructor takes; anything else is refused.

This module is also sent, as source, into the student's kernel (with ``kernel_helpers``, which
describe the student's names and answer the checker's calls there), where it runs under the
student's control: the trust lies only in :func:`decode` on the checker's side. Sizes are bytes.
"""
from __future__ import annotations

import base64
import dataclasses
import inspect
import io
import json
import sys
import types

MAX_BYTES = 32 * 2**20      # largest encoded value accepted
MAX_DEPTH = 32              # deepest nesting of containers
MAX_DIMS = 64               # most dimensions of a meta tensor
LIBRARY = "course_lib"      # the package whose dataclasses cross


class NotPlain(TypeError):
    """A value that cannot cross the wall (its type is named in the message)."""


def _npy(array) -> str:
    import numpy as np

    array = np.ascontiguousarray(array)
    if array.dtype.kind not in "biufcSU":
        raise NotPlain(f"an array of dtype {array.dtype} (only numbers, bools and text cross)")
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _tree(value, depth: int = 0):
    """``value`` as JSON-ready data (tagged dicts for the kinds JSON lacks)."""
    if depth > MAX_DEPTH:
        raise NotPlain("data nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, str):
        return value
    if kind is int:
        return value if abs(value) < 2**53 else {"$": "int", "v": str(value)}
    if kind is float:
        finite = value == value and value not in (float("inf"), float("-inf"))
        return value if finite else {"$": "float", "v": repr(value)}
    if kind in (list, tuple, set, frozenset):
        items = [_tree(v, depth + 1) for v in value]
        return items if kind is list else {"$": kind.__name__, "v": items}
    if kind is dict:
        return {"$": "dict", "v": [[_tree(k, depth + 1), _tree(v, depth + 1)] for k, v in value.items()]}
    module = getattr(kind, "__module__", "") or ""
    if kind is type and getattr(value, "__module__", "") == "numpy" and value.__name__.isalnum():
        return {"$": "nptype", "v": value.__name__}         # np.float32 and the like
    if (module in ("numpy", "numpy.dtypes") and kind.__name__.endswith("DType")
            or kind.__name__ == "dtype" and module == "numpy"):
        return {"$": "npdtype", "v": str(value)}
    if module == "numpy" and kind.__name__ == "ndarray":
        return {"$": "ndarray", "v": _npy(value)}
    if module == "numpy" and hasattr(value, "item") and hasattr(value, "dtype"):  # a NumPy scalar
        return _tree(value.item(), depth)
    if module.startswith("torch"):
        name = kind.__name__
        if name in ("Tensor", "Parameter"):
            tensor = value.detach()
            if tensor.device.type == "meta":
                return {"$": "meta", "v": list(tensor.shape), "dtype": str(tensor.dtype)}
            dtype = str(tensor.dtype)
            if dtype == "torch.bfloat16":
                tensor = tensor.float()
            return {"$": "tensor", "v": _npy(tensor.cpu().numpy()), "dtype": dtype}
        if name == "device":
            return {"$": "device", "v": str(value)}
        if name == "dtype":
            return {"$": "dtype", "v": str(value)}
    if dataclasses.is_dataclass(kind) and (module == LIBRARY or module.startswith(LIBRARY + ".")):
        names = _init_fields(kind)
        return {"$": "dataclass", "v": [[n, _tree(getattr(value, n), depth + 1)] for n in names],
                "cls": f"{module}:{kind.__qualname__}"}
    raise NotPlain(f"an object of type {module + '.' if module and module != 'builtins' else ''}{kind.__name__}")


def _init_fields(cls) -> list:
    """Names of ``cls``'s fields, when its constructor takes exactly these, in this order (so the
    constructor alone rebuilds an instance: no ``init=False`` field, no ``InitVar``, no
    hand-written ``__init__`` that takes something else); else NotPlain."""
    names = [f.name for f in dataclasses.fields(cls)]
    try:
        params = list(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        params = None
    if "__dataclass_fields__" not in vars(cls) or params != names:
        raise NotPlain(f"an instance of {cls.__qualname__}, a dataclass that its fields alone do not rebuild")
    return names


def encode(value) -> str:
    """JSON text of ``value``; NotPlain when something in it cannot cross."""
    text = json.dumps(_tree(value), separators=(",", ":"))
    if len(text) > MAX_BYTES:
        raise NotPlain(f"a value of {len(text)} bytes (the limit is {MAX_BYTES})")
    return text


def _from_npy(text: str):
    import numpy as np

    array = np.load(io.BytesIO(base64.b64decode(text.encode("ascii"), validate=True)), allow_pickle=False)
    if type(array) is not np.ndarray or array.dtype.kind not in "biufcSU":
        raise ValueError("malformed array")
    return array


def _build_tensor(npy: str, dtype_name: str):
    """A torch tensor from its ``.npy`` text and dtype name (the array itself without torch)."""
    array = _from_npy(npy)
    try:
        import torch
    except ImportError:
        return array
    dtype = getattr(torch, dtype_name.removeprefix("torch."), None)
    tensor = torch.from_numpy(array.copy())
    return tensor.to(dtype) if isinstance(dtype, torch.dtype) else tensor


def _build_dataclass(name: str, v: list, depth: int):
    """An instance of one of course_lib's dataclasses, from its fields in order (refused unless
    they are exactly the class's ``__init__`` fields and the class accepts them)."""
    cls = _library_dataclass(name)
    pairs = [_pair(p) for p in v]
    names = [n for n, _ in pairs]
    if names != _init_fields_or_refuse(cls):
        raise ValueError(f"malformed value (the fields of {cls.__qualname__} are not {names!r:.200})")
    fields = {n: _build(x, depth + 1) for n, x in pairs}
    try:
        made = cls(**fields)
    except Exception as exc:  # noqa: BLE001 - the class's own checks refused the fields
        raise ValueError(f"malformed value ({cls.__qualname__} refused its fields: {str(exc)[:100]})") from None
    if type(made) is not cls:
        raise ValueError(f"malformed value ({cls.__qualname__} built something else)")
    return made


def _build(data, depth: int = 0):
    if depth > MAX_DEPTH:
        raise ValueError("data nested too deeply")
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [_build(v, depth + 1) for v in data]
    if kind is not dict or not isinstance(data.get("$"), str):
        raise ValueError(f"malformed value ({kind.__name__})")
    tag, v = data["$"], data.get("v")
    if tag == "int" and type(v) is str:
        return int(v)
    if tag == "float" and v in ("nan", "inf", "-inf"):
        return float(v)
    if tag in ("tuple", "set", "frozenset") and type(v) is list:
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](_build(x, depth + 1) for x in v)
    if tag == "dict" and type(v) is list:
        return {_build(k, depth + 1): _build(x, depth + 1) for k, x in (_pair(p) for p in v)}
    if tag == "ndarray" and type(v) is str:
        return _from_npy(v)
    if tag == "tensor" and type(v) is str and type(data.get("dtype")) is str:
        return _build_tensor(v, data["dtype"])
    if tag == "meta" and type(v) is list and len(v) <= MAX_DIMS and type(data.get("dtype")) is str:
        return _meta_tensor(v, data["dtype"])
    if tag == "dataclass" and type(v) is list and type(data.get("cls")) is str:
        return _build_dataclass(data["cls"], v, depth)
    if tag in ("nptype", "npdtype") and type(v) is str and v.isalnum():
        import numpy as np

        made = getattr(np, v, None) if tag == "nptype" else np.dtype(v)
        if tag == "npdtype" or isinstance(made, type) and issubclass(made, np.generic):
            return made
    if tag in ("device", "dtype") and type(v) is str:
        import torch

        if tag == "device":
            return torch.device(v)
        dtype = getattr(torch, v.removeprefix("torch."), None)
        if isinstance(dtype, torch.dtype):
            return dtype
    raise ValueError(f"malformed value (tag {tag[:20]!r})")


def _meta_tensor(shape: list, dtype_name: str):
    """An empty tensor on the meta device of that shape and dtype."""
    if any(type(n) is not int or not 0 <= n < 2**62 for n in shape):
        raise ValueError("malformed value (the shape of a meta tensor)")
    try:
        import torch
    except ImportError:
        raise ValueError("malformed value (a meta tensor, and torch is missing)") from None
    dtype = getattr(torch, dtype_name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError("malformed value (the dtype of a meta tensor)")  # noqa: TRY004 - decode raises ValueError
    try:
        return torch.empty(shape, dtype=dtype, device="meta")
    except (RuntimeError, ValueError, TypeError, OverflowError):   # e.g. more elements than fit in 64 bits
        raise ValueError("malformed value (a meta tensor of that shape cannot exist)") from None


def _library_dataclass(name: str):
    """The dataclass named ``"module:qualname"``, defined under that name in an already imported
    module of the library; ValueError for anything else."""
    module, _, qualname = name.partition(":")
    parts = module.split(".")
    if parts[0] != LIBRARY or not all(p.isidentifier() for p in parts + qualname.split(".")):
        raise ValueError(f"malformed value (class {name[:100]!r} is not one of {LIBRARY}'s)")
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = vars(obj).get(part) if isinstance(obj, (type, types.ModuleType)) else None
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module
            and obj.__qualname__ == qualname):
        raise ValueError(f"malformed value (class {name[:100]!r} is no dataclass of an imported {LIBRARY} module)")
    return obj


def _init_fields_or_refuse(cls) -> list:
    try:
        return _init_fields(cls)
    except NotPlain as exc:
        raise ValueError(f"malformed value ({exc})") from None


def _pair(p):
    if type(p) is not list or len(p) != 2:
        raise ValueError("malformed dict entry")
    return p


def decode(text: str):
    """The value that :func:`encode` wrote; ValueError for anything malformed or too large."""
    if type(text) is not str or len(text) > MAX_BYTES:
        raise ValueError("missing or oversized value")
    return _build(json.loads(text))
