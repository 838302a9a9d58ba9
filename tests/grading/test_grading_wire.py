"""Unit tests of two kinds of value that cross the wall between the student's kernel and the
trusted checker (``course_tools.grading.wire``): instances of ``course_lib`` dataclasses and
tensors on the ``meta`` device. What ``decode`` refuses is written as the JSON a tampering
kernel would send."""
import dataclasses
import json
import sys
import types

import pytest
import torch

from course_lib.train import EpochRecord
from course_lib.training_memory import MemorySplit
from course_tools.grading import wire
from course_tools.grading.utf8 import valid_text


def _tampered(value, change) -> str:
    """``wire.encode(value)`` with ``change`` applied to its JSON tree (as a hostile kernel would)."""
    tree = json.loads(wire.encode(value))
    change(tree)
    return json.dumps(tree)


def test_course_lib_dataclasses_cross_and_are_rebuilt_by_their_class():
    split = MemorySplit(parameters=100, gradients=100, optimizer_state=200, activations=30,
                        input_shape=(1, 28, 28), optimizer="sgd")
    runs = {"0 workers": EpochRecord(epoch=1, loss=0.5, seconds=10.0, samples=6400, data_seconds=8.0),
            "big": EpochRecord(2, float("nan"), 3.0, 2**70)}
    back = wire.decode(wire.encode([split, runs]))
    assert type(back[0]) is MemorySplit and back[0] == split
    assert back[0].input_shape == (1, 28, 28) and type(back[0].input_shape) is tuple
    assert back[0].total == 430                                    # the class's own behaviour, bytes
    assert type(back[1]["0 workers"]) is EpochRecord and back[1]["0 workers"] == runs["0 workers"]
    assert back[1]["big"].samples == 2**70 and back[1]["big"].loss != back[1]["big"].loss
    assert back[1]["big"].data_fraction == 0.0


def test_meta_tensors_cross_as_shape_and_dtype():
    for tensor in [torch.ones(10, 3, device="meta"), torch.empty(0, 2, 5, dtype=torch.bfloat16, device="meta"),
                   torch.nn.Parameter(torch.empty(4, device="meta", dtype=torch.float64)),
                   torch.empty(4, device="meta", dtype=torch.int64),
                   torch.empty((), dtype=torch.complex64, device="meta")]:
        back = wire.decode(wire.encode({"out": tensor}))["out"]
        assert type(back) is torch.Tensor and back.device == torch.device("meta")
        assert back.shape == tensor.shape and back.dtype == tensor.dtype


def test_a_dataclass_outside_course_lib_is_refused():
    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.raises(wire.NotPlain, match="Local"):
        wire.encode(Local(1))
    forged = _tampered(EpochRecord(1, 0.5, 2.0, 10), lambda t: t.update(cls="fractions:Fraction"))
    with pytest.raises(ValueError, match="not one of course_lib"):
        wire.decode(forged)
    for name in ["course_lib.train:<locals>.EpochRecord", "course_lib..train:EpochRecord",
                 "course_lib.train:os.system", "course_lib_evil.train:EpochRecord"]:
        with pytest.raises(ValueError):
            wire.decode(_tampered(EpochRecord(1, 0.5, 2.0, 10), lambda t, name=name: t.update(cls=name)))


def test_a_course_lib_class_that_is_no_dataclass_or_not_imported_is_refused():
    import course_lib.data

    assert isinstance(course_lib.data.SlowDataset, type)
    assert not dataclasses.is_dataclass(course_lib.data.SlowDataset)
    for name in ["course_lib.data:SlowDataset", "course_lib.train:train", "course_lib.train:sys",
                 "course_lib.train:History.__init__", "course_lib.train:EpochRecord.__class__",
                 "course_lib.train:dataclass"]:
        with pytest.raises(ValueError, match="no dataclass"):
            wire.decode(_tampered(EpochRecord(1, 0.5, 2.0, 10), lambda t, name=name: t.update(cls=name)))
    assert "course_lib.never_imported" not in sys.modules
    with pytest.raises(ValueError, match="no dataclass"):
        wire.decode(_tampered(EpochRecord(1, 0.5, 2.0, 10), lambda t: t.update(cls="course_lib.never_imported:X")))
    assert "course_lib.never_imported" not in sys.modules   # decoding imports nothing
    # a dataclass reached under another name than its own is refused
    alias = types.ModuleType("course_lib.alias_for_test")
    alias.Record = EpochRecord
    sys.modules[alias.__name__] = alias
    try:
        with pytest.raises(ValueError, match="no dataclass"):
            wire.decode(_tampered(EpochRecord(1, 0.5, 2.0, 10),
                                  lambda t: t.update(cls="course_lib.alias_for_test:Record")))
    finally:
        del sys.modules[alias.__name__]


@pytest.mark.parametrize("change, words", [
    (lambda t: t["v"].pop(), "fields of EpochRecord are not"),                  # a field missing
    (lambda t: t["v"].append(["extra", 1]), "fields of EpochRecord are not"),   # a field the class lacks
    (lambda t: t["v"].reverse(), "fields of EpochRecord are not"),              # right names, other order
    (lambda t: t["v"].append(t["v"][0]), "fields of EpochRecord are not"),      # a field twice
    (lambda t: t["v"].__setitem__(0, [["epoch"], 1]), "fields of EpochRecord are not"),  # a name no string
    (lambda t: t["v"].__setitem__(0, ["epoch", 1, 2]), "malformed dict entry"),  # not a pair
    (lambda t: t.update(v={"epoch": 1}), "malformed value"),                    # fields not as a list
], ids=["missing", "extra", "reordered", "twice", "unhashable", "triple", "dict"])
def test_a_forged_field_list_is_refused(change, words):
    with pytest.raises(ValueError, match=words):
        wire.decode(_tampered(EpochRecord(1, 0.5, 2.0, 10, 0.25), change))


def test_a_field_value_must_be_plain_data_both_ways():
    odd = EpochRecord(1, 0.5, 2.0, 10, data_seconds=object())
    with pytest.raises(wire.NotPlain, match="object"):
        wire.encode(odd)
    with pytest.raises(wire.NotPlain, match="function"):
        wire.encode(MemorySplit(1, 2, 3, 4, optimizer=lambda: "adam"))
    with pytest.raises(ValueError, match="malformed"):
        wire.decode(_tampered(EpochRecord(1, 0.5, 2.0, 10),
                              lambda t: t["v"][1].__setitem__(1, {"$": "pickle", "v": ""})))


def test_dataclasses_that_their_fields_do_not_rebuild_are_refused():
    module = types.ModuleType("course_lib.wire_test_classes")
    sys.modules[module.__name__] = module
    try:
        exec("import dataclasses\n"                                          # noqa: S102 - test classes
             "@dataclasses.dataclass\nclass Derived:\n"
             "    x: int\n    y: int = dataclasses.field(init=False, default=0)\n"
             "@dataclasses.dataclass\nclass WithInitVar:\n    x: int\n    scale: dataclasses.InitVar[int] = 1\n"
             "@dataclasses.dataclass\nclass Plain:\n    x: int\n"
             "class Subclass(Plain):\n    pass\n", module.__dict__)
        for obj in [module.Derived(1), module.WithInitVar(1), module.Subclass(1)]:
            with pytest.raises(wire.NotPlain, match="do not rebuild"):
                wire.encode(obj)
        assert wire.decode(wire.encode(module.Plain(3))) == module.Plain(3)
        text = json.dumps({"$": "dataclass", "cls": "course_lib.wire_test_classes:Derived", "v": [["x", 1]]})
        with pytest.raises(ValueError, match="do not rebuild"):
            wire.decode(text)
    finally:
        del sys.modules[module.__name__]


def test_a_constructor_that_refuses_its_fields_gives_a_value_error():
    module = types.ModuleType("course_lib.wire_test_strict")
    sys.modules[module.__name__] = module
    try:
        exec("import dataclasses\n@dataclasses.dataclass\nclass Positive:\n    x: int\n"   # noqa: S102
             "    def __post_init__(self):\n        if self.x <= 0:\n            raise ValueError('x must be > 0')\n",
             module.__dict__)
        text = json.dumps({"$": "dataclass", "cls": "course_lib.wire_test_strict:Positive", "v": [["x", -1]]})
        with pytest.raises(ValueError, match="refused its fields"):
            wire.decode(text)
    finally:
        del sys.modules[module.__name__]


@pytest.mark.parametrize("tree", [
    {"$": "meta", "v": [2, -1], "dtype": "torch.float32"},
    {"$": "meta", "v": [2, True], "dtype": "torch.float32"},
    {"$": "meta", "v": [2.0], "dtype": "torch.float32"},
    {"$": "meta", "v": [1] * (wire.MAX_DIMS + 1), "dtype": "torch.float32"},
    {"$": "meta", "v": [2**61, 2**61, 2**61], "dtype": "torch.float32"},
    {"$": "meta", "v": [2], "dtype": "torch.Tensor"},
    {"$": "meta", "v": [2], "dtype": "float32; import os"},
    {"$": "meta", "v": [2]},
    {"$": "meta", "v": "2", "dtype": "torch.float32"},
], ids=["negative", "bool", "float", "too many dims", "overflow", "not a dtype", "odd dtype", "no dtype", "no list"])
def test_a_malformed_meta_tensor_is_refused(tree):
    with pytest.raises(ValueError, match="malformed"):
        wire.decode(json.dumps(tree))


def test_valid_text_escapes_lone_surrogates_everywhere_and_keeps_valid_text():
    """What a tampering kernel's JSON may spell (``"\\ud800"``) becomes the visible six characters
    ``\\ud800``, in strings, dict keys and lists nested deeper than Python's recursion limit;
    valid text (a real astral character included) is the same object afterwards."""
    message = json.loads('{"text": "a \\ud800 b", "\\udcff key": ["\\ud83d\\ude00", "\\ude00 alone", 5, null]}')
    assert valid_text(message) is message
    assert message == {"text": "a \\ud800 b", "\\udcff key": ["\U0001F600", "\\ude00 alone", 5, None]}
    json.dumps(message, ensure_ascii=False).encode("utf-8")   # writable as UTF-8 now
    deep = "\udfff"
    for _ in range(sys.getrecursionlimit() + 100):
        deep = [deep]
    inner = valid_text(deep)
    while isinstance(inner, list):
        inner = inner[0]
    assert inner == "\\udfff"
    text = "plain \u00e9 \U0001F600"
    assert valid_text(text) is text and valid_text("\ud800") == "\\ud800"
