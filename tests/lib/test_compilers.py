"""Tests of the compiler helpers (torch.compile itself is exercised by lesson 05, not here: it is slow)."""
import pytest
import torch

from course_lib import compilers as C


def branchy(x):
    if x.sum() > 0:
        return x + 10
    return x - 10


def test_make_mlp_shapes_and_eval_mode():
    m = C.make_mlp(512, (256, 128), 2)
    assert m(torch.zeros(3, 512)).shape == (3, 2) and not m.training
    assert sum(p.numel() for p in m.parameters()) == 512 * 256 + 256 + 256 * 128 + 128 + 128 * 2 + 2


def test_trace_freezes_a_branch_and_script_keeps_it():
    pos, neg = torch.ones(3), -torch.ones(3)
    traced = C.trace(branchy, pos)
    scripted = C.script(branchy)
    assert C.disagreements(branchy, traced, [pos, neg]) == [1]
    assert C.disagreements(branchy, scripted, [pos, neg]) == []


def test_speedup_arithmetic():
    s = C.Speedup(eager_seconds=2e-3, compiled_seconds=1e-3, compile_seconds=10.0)
    assert s.steady == pytest.approx(2.0)
    assert s.break_even_calls == pytest.approx(10_000)
    assert s.including_compile(10_000) == pytest.approx(1.0)
    assert C.Speedup(1e-3, 2e-3, 1.0).break_even_calls == float("inf")


def test_measure_speedup_and_dispatch_overhead_return_positive_seconds():
    m = C.make_mlp(8, (8,), 2)
    x = torch.randn(1, 8)
    s = C.measure_speedup(m, C.trace(m, x), x, compile_seconds=0.0, repeat=3)
    assert s.eager_seconds > 0 and s.compiled_seconds > 0
    rows = C.dispatch_overhead(sizes=(1, 16))
    assert [n for n, _ in rows] == [1, 16] and all(t > 0 for _, t in rows)


def test_export_graph_ops_saving_and_round_trip():
    m = C.make_mlp(8, (4,), 2)
    x = torch.randn(2, 8)
    exported = C.export(m, x)
    assert C.graph_ops(exported) == ["aten.linear.default", "aten.relu.default", "aten.linear.default"]
    assert torch.allclose(C.round_trip(exported)(x), m(x))
    assert C.saved_size(m, "state_dict") > 0 and C.saved_size(exported) > 0
    assert C.saved_size(C.trace(m, x), "jit") > 0
    with pytest.raises(ValueError):
        C.saved_size(m, "pickle")


def test_compile_failure_is_reported_not_raised():
    result = C.compile_and_warm(C.make_mlp(4, (4,), 2), torch.randn(1, 4), backend="no_such_backend")
    assert not result.ok and result.error


class Branchy(torch.nn.Module):
    def forward(self, x):
        return branchy(x)


class WithCond(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: x + 10, lambda x: x - 10, (x,))


def test_export_refuses_a_data_dependent_if_and_accepts_torch_cond():
    exported, reason = C.try_export(Branchy(), torch.ones(3))
    assert exported is None and reason
    exported, reason = C.try_export(WithCond(), torch.ones(3))
    assert reason == "" and torch.equal(exported.module()(-torch.ones(3)), torch.full((3,), -11.0))


def test_graph_breaks_counts_the_break_at_a_data_dependent_if():
    graphs, breaks, reasons = C.graph_breaks(branchy, torch.ones(3))
    assert breaks >= 1 and graphs >= 1 and len(reasons) == breaks
    assert C.graph_breaks(lambda x: x * 2 + 1, torch.ones(3))[1] == 0


def test_count_compiles_shape_then_value_recompile_and_mark_dynamic():
    def g(x, k):
        return x * k + 1

    log = C.count_compiles(g, [(torch.ones(4), 2), (torch.ones(8), 2), (torch.ones(16), 2), (torch.ones(4), 3)])
    assert log.compiles_after_call == [1, 2, 2, 3] and log.compiles == 3
    assert "size mismatch" in log.recompile_reasons[0] and "k == 2" in log.recompile_reasons[1]
    x = torch.ones(4)
    torch._dynamo.mark_dynamic(x, 0)
    assert C.count_compiles(g, [(x, 2), (torch.ones(8), 2), (torch.ones(16), 2)]).compiles == 1


def test_graph_breaks_counts_an_item_break():
    def f(x):
        return x * x.max().item()

    graphs, breaks, reasons = C.graph_breaks(f, torch.ones(3))
    assert (graphs, breaks) == (2, 1) and reasons


def test_cpp_kernels_extracts_raw_strings():
    code = "k = async_compile.cpp_pybinding(['float*'], r'''\nextern \"C\" void kernel() {}\n''')\n"
    assert C.cpp_kernels(code) == ['extern "C" void kernel() {}']
