"""Runtime guards: integrity snapshot, precision flags, the strict op guard, output checks."""

from __future__ import annotations

import builtins
import sys
import time

import pytest
import torch

from cuda_agent_cli.resources import tools_dir

sys.path.insert(0, str(tools_dir()))  # the locked job modules import each other by name
import integrity  # noqa: E402
import op_guard  # noqa: E402
import output_checks  # noqa: E402

ATOL = RTOL = 1e-2


def failed(checks: list[dict]) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in checks if not c["passed"]}


def run_checks(ref, cand, inputs_before=None, inputs_after=None, atol=ATOL, rtol=RTOL):
    x = torch.randn(16, 16)
    before = inputs_before if inputs_before is not None else [x.clone()]
    after = inputs_after if inputs_after is not None else [x]
    return output_checks.compare_outputs(ref, cand, before, after, after, atol, rtol)


@pytest.fixture
def ref():
    torch.manual_seed(0)
    x = torch.randn(32, 32)
    return torch.relu(x @ x)


# --------------------------------------------------------------------------------------------
# compare_outputs
# --------------------------------------------------------------------------------------------


def test_honest_output_passes_every_check(ref):
    checks = run_checks(ref, ref + 1e-5 * torch.randn_like(ref))
    assert [c["name"] for c in checks] == [
        "output_type",
        "aliasing",
        "inputs_unchanged",
        "correctness",
        "relative_error",
        "nonconstant",
    ]
    assert failed(checks) == {}
    assert "max abs err" in next(c for c in checks if c["name"] == "correctness")["detail"]


def test_tuple_outputs_are_checked_leaf_by_leaf(ref):
    assert failed(run_checks((ref, ref * 2), (ref.clone(), ref * 2))) == {}
    bad = failed(run_checks((ref, ref * 2), (ref.clone(), ref * 3)))
    assert "correctness" in bad and "output[1]" in bad["correctness"]


def test_wrong_element_is_located(ref):
    cand = ref.clone()
    cand[3, 7] += 5.0
    bad = failed(run_checks(ref, cand))
    assert "(3, 7)" in bad["correctness"] and "1/1024" in bad["correctness"]


def test_zero_output_inside_atol_fails_relative_error_and_nonconstant():
    tiny = torch.randn(64, 64) * 1e-4  # every element is within atol of zero
    bad = failed(run_checks(tiny, torch.zeros_like(tiny)))
    assert "correctness" not in bad
    assert "relative_error" in bad and "nonconstant" in bad


def test_constant_mean_output_fails_nonconstant():
    # Every element of the mean is within tolerance and the norm error is under rtol: only
    # the non-constant check can tell that the output ignores its input.
    ref = 0.3 + 2e-3 * torch.randn(64, 64)
    bad = failed(run_checks(ref, torch.full_like(ref, float(ref.mean()))))
    assert set(bad) == {"nonconstant"}


def test_constant_reference_allows_constant_output():
    ref = torch.ones(8, 8)
    assert failed(run_checks(ref, torch.ones(8, 8))) == {}


def test_scaled_output_within_atol_fails_relative_error():
    ref = torch.randn(64, 64) * 2e-3
    bad = failed(run_checks(ref, ref * 0.3))
    assert "correctness" not in bad and "relative_error" in bad


@pytest.mark.parametrize(
    "cand_fn, reason",
    [
        (lambda r: torch.nn.Parameter(r.clone()), "not a plain torch.Tensor"),
        (lambda r: r.clone().to_sparse(), "layout"),
        (lambda r: torch.empty(r.shape, device="meta"), "meta"),
        (lambda r: r.double(), "dtype"),
        (lambda r: r.reshape(-1), "shape"),
        (lambda r: (r.clone(),), "structure"),
    ],
)
def test_output_type(ref, cand_fn, reason):
    bad = failed(run_checks(ref, cand_fn(ref)))
    assert reason in bad["output_type"]
    assert "correctness" not in bad  # value checks need matching plain tensors first


def test_tensor_subclass_output_fails():
    class Lazy(torch.Tensor):
        pass

    ref = torch.randn(4, 4)
    bad = failed(run_checks(ref, ref.clone().as_subclass(Lazy)))
    assert "output_type" in bad


@pytest.mark.parametrize(
    "alias",
    [
        lambda x: x,
        lambda x: x.view(-1).view(16, 16),
        lambda x: x[:, :].t().t(),
        lambda x: torch.as_strided(x, (16, 16), (16, 1)),
    ],
)
def test_output_aliasing_an_input_fails(alias):
    x = torch.randn(16, 16)
    checks = output_checks.compare_outputs(x.clone(), alias(x), [x.clone()], [x], [x], ATOL, RTOL)
    assert "aliasing" in failed(checks)


def test_output_in_other_memory_does_not_alias():
    x = torch.randn(16, 16)
    checks = output_checks.compare_outputs(x.clone(), x.clone(), [x.clone()], [x], [x], ATOL, RTOL)
    assert failed(checks) == {}


def test_modified_input_fails_inputs_unchanged(ref):
    x = torch.randn(16, 16)
    saved = x.clone()
    x.mul_(0)
    bad = failed(output_checks.compare_outputs(ref, ref.clone(), [saved], [x], [x], ATOL, RTOL))
    assert set(bad) == {"inputs_unchanged"}


def test_nan_inputs_compare_equal_to_themselves(ref):
    x = torch.full((4,), float("nan"))
    assert failed(output_checks.compare_outputs(ref, ref.clone(), [x.clone()], [x], [x], ATOL, RTOL)) == {}


def test_nan_and_inf_agreement():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 2.0])
    assert failed(run_checks(ref, ref.clone())) == {}
    cand = ref.clone()
    cand[1] = 0.0
    assert "correctness" in failed(run_checks(ref, cand))
    cand = ref.clone()
    cand[2] = 1e30
    assert "correctness" in failed(run_checks(ref, cand))


def test_finite_output_where_the_reference_is_infinite_fails():
    ref = torch.tensor([1.0, 2.0, float("inf")])
    bad = failed(run_checks(ref, torch.tensor([1.0, 2.0, 1e30])))
    assert "correctness" in bad and "(2,)" in bad["correctness"]


def test_integer_outputs_must_match_exactly():
    ref = torch.arange(10)
    assert failed(run_checks(ref, ref.clone())) == {}
    assert "correctness" in failed(run_checks(ref, ref + (ref == 3).long()))


def test_relative_error_threshold_follows_rtol_dtype_and_scale():
    assert output_checks.relative_error_threshold(1.0, torch.float32, 1e-2, 1e-2) == 1e-2
    # bf16 rounding alone is 2**-8 per element: a tight rtol must not reject honest bf16 output
    assert output_checks.relative_error_threshold(1.0, torch.bfloat16, 1e-3, 1e-3) == 8 * 2**-7
    # a reference that lives inside the atol band only needs to be followed, not matched
    assert output_checks.relative_error_threshold(1e-4, torch.float32, 1e-2, 1e-2) == 0.5


def test_honest_bf16_output_passes():
    ref = torch.randn(256, 256).bfloat16()
    noisy = (ref.float() * (1 + 2e-3 * torch.randn(256, 256))).bfloat16()
    assert failed(run_checks(ref, noisy)) == {}


def test_guards_ignore_a_monkeypatched_torch(ref, monkeypatch):
    monkeypatch.setattr(torch, "equal", lambda *a, **k: True)
    monkeypatch.setattr(torch, "abs", lambda t: torch.zeros_like(t))
    monkeypatch.setattr(torch.Tensor, "__gt__", lambda *a: torch.zeros((), dtype=torch.bool))
    bad = failed(run_checks(ref, torch.zeros_like(ref)))
    assert "correctness" in bad


# --------------------------------------------------------------------------------------------
# integrity
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "patch, expected",
    [
        (lambda mp: mp.setattr(time, "perf_counter", lambda: 0.0), "time.perf_counter was replaced"),
        (lambda mp: mp.setattr(time, "perf_counter_ns", lambda: 0), "time.perf_counter_ns was replaced"),
        (
            lambda mp: mp.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.001),
            "torch.cuda.Event.elapsed_time was replaced",
        ),
        (lambda mp: mp.setattr(torch.cuda, "synchronize", lambda *a: None), "torch.cuda.synchronize was replaced"),
        (
            lambda mp: mp.setattr(torch.testing, "assert_close", lambda *a, **k: None),
            "torch.testing.assert_close was replaced",
        ),
        (lambda mp: mp.setattr(torch, "allclose", lambda *a, **k: True), "torch.allclose was replaced"),
        (lambda mp: mp.setattr(torch.Tensor, "__eq__", lambda *a: True), "torch.Tensor.__eq__ was replaced"),
        (
            lambda mp: mp.setattr(torch.nn.functional, "relu", lambda x, inplace=False: x),
            "torch.nn.functional.relu was replaced",
        ),
        (lambda mp: mp.setattr(builtins, "print", lambda *a, **k: None), "builtins.print was replaced"),
        (lambda mp: mp.setattr(builtins, "Model", object, raising=False), "builtins.Model was added"),
        (lambda mp: mp.setitem(sys.modules, "json", object()), "sys.modules['json'] was replaced"),
        (lambda mp: mp.setitem(sys.modules, "model", object()), "the reference module 'model'"),
        (lambda mp: mp.setattr(sys, "meta_path", [*sys.meta_path, object()]), "sys.meta_path"),
    ],
)
def test_integrity_detects_tampering(monkeypatch, patch, expected):
    snap = integrity.snapshot_integrity()
    assert integrity.verify_integrity(snap) == []
    patch(monkeypatch)
    problems = integrity.verify_integrity(snap)
    assert any(expected in p for p in problems), problems


def test_integrity_detects_a_dispatch_mode_left_behind():
    from torch.utils._python_dispatch import TorchDispatchMode

    snap = integrity.snapshot_integrity()
    mode = TorchDispatchMode()
    mode.__enter__()
    try:
        assert any("dispatch mode" in p for p in integrity.verify_integrity(snap))
    finally:
        mode.__exit__(None, None, None)


def test_integrity_is_quiet_after_normal_torch_use():
    snap = integrity.snapshot_integrity()
    import torch.utils.cpp_extension  # noqa: F401  (what a load_inline candidate imports)

    with op_guard.StrictOpGuard("strict"):
        torch.empty(3)
    torch.nn.functional.relu(torch.randn(3))
    assert integrity.verify_integrity(snap) == []


def test_precision_flags_report_changes():
    # Set and restored by hand: torch's backend flags are properties of a module object, which
    # monkeypatch cannot always restore (it depends on the pytest and torch versions).
    matmul = torch.backends.cuda.matmul
    before = integrity.precision_flags()
    assert before["cuda.matmul.allow_tf32"] is False
    try:
        matmul.allow_tf32 = True
        changed = integrity.diff_precision_flags(before, integrity.precision_flags())
        assert any(c.startswith("cuda.matmul.allow_tf32: False -> True") for c in changed)
    finally:
        matmul.allow_tf32 = False
    assert integrity.diff_precision_flags(before, integrity.precision_flags()) == []


# --------------------------------------------------------------------------------------------
# StrictOpGuard
# --------------------------------------------------------------------------------------------


def test_strict_guard_allows_allocation_views_and_copies():
    x = torch.randn(4, 8)
    with op_guard.StrictOpGuard("strict") as g:
        y = torch.empty_like(x)
        y.copy_(x.t().contiguous().t())
        z = y.view(-1).reshape(8, 4).permute(1, 0).contiguous()
        torch.zeros(3), torch.ones(2, 2), x.new_empty((2,)), x.size(0), z.shape, x[1:, :2], x.float()
        x.unsqueeze(0).squeeze(0).expand(4, 8)
    assert g.violations == []
    assert g.detail() == "no torch compute ops in forward"


def test_strict_guard_counts_every_op_it_dispatches():
    # What the null blocks' stand-in repeats, so the host time of each op's dispatch is not
    # charged to the kernel (tools/serving.py).
    x = torch.randn(4, 8)
    with op_guard.StrictOpGuard("strict") as g:
        for _ in range(5):
            x = x.view(-1).view(4, 8)
        torch.empty(3)
    assert g.violations == [] and g.dispatched == 11
    with op_guard.StrictOpGuard("hybrid") as off:
        x.view(-1)
    assert off.dispatched == 0


@pytest.mark.parametrize(
    "op, expected",
    [
        (lambda x: torch.relu(x), "aten.relu"),
        (lambda x: torch.nn.functional.gelu(x), "aten.gelu"),
        (lambda x: x.sum(), "aten.sum"),
        (lambda x: x @ x.t(), "aten.mm"),
        (lambda x: x + 1, "aten.add"),
        (lambda x: torch.ops.aten.tanh.default(x), "aten.tanh"),
        (lambda x: x.softmax(-1), "aten._softmax"),
    ],
)
def test_strict_guard_records_compute_ops(op, expected):
    x = torch.randn(4, 4)
    with torch.no_grad(), op_guard.StrictOpGuard("strict") as g:
        op(x)
    assert any(v.startswith(expected) for v in g.violations), g.violations
    assert "strict policy" in g.detail()


def test_hybrid_guard_records_nothing():
    with op_guard.StrictOpGuard("hybrid") as g:
        torch.relu(torch.randn(3))
    assert g.violations == []


def test_strict_guard_notices_being_removed():
    from torch.utils._python_dispatch import _pop_mode

    with op_guard.StrictOpGuard("strict") as g:
        _pop_mode()
    assert any("removed" in v for v in g.violations)


def test_strict_guard_counts_repeats():
    x = torch.randn(4)
    with op_guard.StrictOpGuard("strict") as g:
        for _ in range(3):
            torch.exp(x)
    assert g.counts[g.violations[0]] == 3 and "x3" in g.detail()


def test_integrity_detects_edits_to_the_harness_own_modules(monkeypatch):
    # As in the harness's worker: the tools folder on sys.path, its modules imported by name.
    monkeypatch.syspath_prepend(str(tools_dir()))
    import timing

    snap = integrity.snapshot_integrity()
    original_code, original_flush = timing.call_inputs.__code__, timing.FLUSH_BYTES

    def same_inputs(base, seed, device):
        return base

    try:
        timing.call_inputs.__code__ = same_inputs.__code__  # same function object, new body
        timing.FLUSH_BYTES = 0  # a global the timing code reads
        problems = integrity.verify_integrity(snap)
    finally:
        timing.call_inputs.__code__, timing.FLUSH_BYTES = original_code, original_flush
    assert any("call_inputs.__code__ was replaced" in p for p in problems)
    assert any("FLUSH_BYTES was replaced" in p for p in problems)
    assert integrity.verify_integrity(snap) == []


def _values(ref, cand, exact=None):
    _, values = output_checks.compare_values(ref, cand, 1e-2, 1e-2, exact)
    return {c["name"]: c for c in values}


def test_small_outputs_are_judged_from_the_float64_reference():
    torch.manual_seed(0)
    x = torch.randn(64, 512)
    exact = torch.softmax(x.double(), dim=-1)
    eager = torch.softmax(x, dim=-1)
    # every probability is near 1/512, inside atol: a normalizer fixed in advance is a few % off
    fixed = torch.exp(x) / (512 * torch.exp(torch.tensor(0.5)))
    assert _values(eager, fixed)["relative_error"]["passed"]  # the allowance without the anchor
    found = _values(eager, fixed, exact)["relative_error"]
    assert not found["passed"] and "float64 reference" in found["detail"]
    # an honest softmax summed in another order passes
    honest = torch.exp(x - x.max(-1, keepdim=True).values)
    honest = honest / honest.flip(-1).cumsum(-1)[..., -1:]
    assert _values(eager, honest, exact)["relative_error"]["passed"]


def test_the_anchor_allows_what_eager_itself_gets_wrong():
    # a sum with cancellation: eager's own float32 error is large, the candidate's the same kind
    torch.manual_seed(1)
    x = torch.randn(16, 4096) * 1e4
    x = torch.cat([x, -x + 1e-3 * torch.randn(16, 4096)], dim=-1)
    exact = x.double().sum(-1)
    eager = x.sum(-1)
    other = x.flip(-1).sum(-1)
    assert _values(eager, other, exact)["relative_error"]["passed"]


def test_complex_outputs_are_compared_as_numbers():
    torch.manual_seed(2)
    a = torch.randn(32, 32, dtype=torch.complex64)
    b = torch.randn(32, 32, dtype=torch.complex64)
    ref = a @ b
    exact = a.to(torch.complex128) @ b.to(torch.complex128)
    honest = (a.unsqueeze(-1) * b.unsqueeze(0)).sum(1)
    checks = _values(ref, honest, exact)
    assert all(c["passed"] for c in checks.values()), checks
    wrong = ref.conj()
    assert not _values(ref, wrong, exact)["correctness"]["passed"]
    assert not _values(ref, ref.real.to(torch.complex64) * 0 + ref.abs().to(torch.complex64), exact)["correctness"][
        "passed"
    ]


def test_an_accumulating_index_put_is_compute_under_strict():
    x = torch.randn(8, 16)
    rows = torch.arange(8).repeat_interleave(16)
    out = torch.zeros(8)
    with op_guard.StrictOpGuard("strict") as guard:
        torch.ops.aten._unsafe_index_put(out, [rows], x.reshape(-1), True)  # row sums as a scatter-add
    assert guard.violations == ["aten._unsafe_index_put.default(accumulate=True)"]
    with op_guard.StrictOpGuard("strict") as guard:
        torch.ops.aten._unsafe_index_put(out, [torch.arange(8)], x[:, 0], False)  # a copy: allowed
        torch.ops.aten._unsafe_index_put(out, [torch.arange(8)], x[:, 1], accumulate=False)
    assert guard.violations == []
    with op_guard.StrictOpGuard("strict") as guard:
        torch.ops.aten._unsafe_index_put(out, [rows], x.reshape(-1), accumulate=True)
    assert guard.violations == ["aten._unsafe_index_put.default(accumulate=True)"]
