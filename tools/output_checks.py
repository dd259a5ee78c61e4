"""Locked: the output checks of one call (docs/security.md, threats 6, 8, 9, 10, 32).

`compare_values` decides output_type, then correctness, relative_error and nonconstant from
the statistics of each output pair (`_PairStats`, one sweep over the data; the float64 reference
decides the relative error where there is one, else `relative_error_threshold`);
`compare_outputs` adds aliasing and inputs_unchanged (tools/evidence.py). Everything is computed
with functions captured when this module was imported and with torch-function overrides
disabled, so a candidate that monkeypatches torch afterwards cannot change what they compute.
Imports only torch, the standard library and evidence.py, so it runs from the pristine tools/
copy on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import evidence
import precision
import torch
import wire

# Captured at import, before any candidate code runs in this process.
_Tensor = torch.Tensor
_DisableTorchFunction = torch._C.DisableTorchFunction
_abs = torch.abs
_sub = torch.sub
_mul = torch.mul
_add = torch.add
_gt = torch.gt
_le = torch.le
_aminmax = torch.aminmax
_isnan = torch.isnan
_isinf = torch.isinf
_logical_xor = torch.logical_xor
_logical_and = torch.logical_and
_logical_or = torch.logical_or
_logical_not = torch.logical_not
_where = torch.where
_equal = torch.equal
_allclose = torch.allclose
_count_nonzero = torch.count_nonzero
_max = torch.max
_min = torch.min
_amax = torch.amax
_amin = torch.amin
_argmax = torch.argmax
_linalg_vector_norm = torch.linalg.vector_norm
_nan_to_num = torch.nan_to_num
_zeros_like = torch.zeros_like
_view_as_real = torch.view_as_real


def compare_outputs(
    ref: Any,
    cand: Any,
    inputs_before: Sequence[Any],
    inputs_after: Sequence[Any],
    candidate_inputs: Sequence[Any],
    atol: float,
    rtol: float,
) -> list[wire.Check]:
    """The output checks for one call, each as {"name", "passed", "detail"}.

    `ref`/`cand`: the reference's and the candidate's outputs (a tensor or nested tuples/lists).
    `inputs_before`: copies of the candidate's inputs saved before its call; `inputs_after`: the
    candidate's inputs after the call; `candidate_inputs`: the tensors handed to the candidate
    (usually the same objects as `inputs_after`; model parameters may be appended).
    Value checks run only when output_type passed, since they need matching plain tensors.
    """
    with _DisableTorchFunction():
        type_check, values = compare_values(ref, cand, atol, rtol)
        cand_tensors = [c for _, c in _leaves(cand) if _tensor_problem(c) is None]
    # The same decisions the judge reaches from a candidate process's evidence.
    aliasing = evidence.check_aliasing(evidence.byte_ranges(cand_tensors), evidence.byte_ranges(list(candidate_inputs)))
    unchanged = evidence.check_inputs_unchanged(
        evidence.fingerprint(list(inputs_before)), evidence.fingerprint(list(inputs_after))
    )
    return [type_check, aliasing, unchanged] + values


def compare_values(
    ref: Any, cand: Any, atol: float, rtol: float, exact: Any = None, mode: str = "kernelbench"
) -> tuple[wire.Check, list[wire.Check]]:
    """output_type, then (when it passed) correctness, relative_error and nonconstant.

    `exact`: the reference's outputs for the same inputs computed in float64, or a function that
    makes them (None where that cannot be done): the relative error of the candidate is judged
    against eager's own error from it, by `mode` (tools/precision.py): by default at most
    precision.ANCHOR times eager's own at the module's dtype, with that dtype's floor. Under the
    KernelBench tolerance (`mode="kernelbench"`) rtol is the floor, and a function is called
    only where the anchor can decide: an output whose reference sits inside the atol band, or
    one the plain bound would reject."""
    with _DisableTorchFunction():
        type_check, pairs = _check_output_type(ref, cand)
        if not type_check["passed"]:
            return type_check, []
        stats = [_pair_stats(path, r, c, atol, rtol) for path, r, c in pairs]
        if callable(exact) and (mode != "kernelbench" or any(_anchor_decides(st, atol, rtol) for st in stats)):
            exact = exact()
        if exact is not None and not callable(exact):
            exact_leaves = _exact_leaves(ref, exact)
            stats = [_pair_stats(path, r, c, atol, rtol, exact_leaves.get(path)) for path, r, c in pairs]
        return type_check, [
            _check_correctness(stats, atol, rtol),
            _check_relative_error(stats, atol, rtol, mode),
            _check_nonconstant(stats),
        ]


# Under the KernelBench tolerance, the candidate's error from the float64 reference may be up to
# this many times eager's own error in the task's dtype (FlashAttention's rule: at most twice
# PyTorch's error); by default tools/precision.py decides.
ANCHOR = 2.0


def _anchor_decides(st: "_PairStats", atol: float, rtol: float) -> bool:
    """Whether the float64 reference can change the relative-error verdict of this output."""
    if not st.floating or st.numel == 0 or st.ref_norm == 0.0:
        return False
    rms = st.ref_norm / math.sqrt(max(1, st.usable))
    return rms < atol or st.err_norm / st.ref_norm > max(rtol, 8.0 * torch.finfo(st.dtype).eps)


def _exact_leaves(ref: Any, exact: Any) -> dict[str, Any]:
    """path -> the float64 output of the same leaf, where `exact` has the reference's structure."""
    if exact is None or _structure(ref) != _structure(exact):
        return {}
    return {path: e for (path, _), (_, e) in zip(_leaves(ref), _leaves(exact)) if isinstance(e, _Tensor)}


def all_close(a: Any, b: Any, atol: float, rtol: float) -> bool:
    """Same structure, shapes and values within atol/rtol (NaN equal to NaN): for run-twice checks."""
    a_items = a if isinstance(a, (list, tuple)) else [a]
    b_items = b if isinstance(b, (list, tuple)) else [b]
    if len(a_items) != len(b_items):
        return False
    with _DisableTorchFunction():
        for x, y in zip(a_items, b_items):
            if type(x) is not _Tensor or type(y) is not _Tensor or x.shape != y.shape:
                return False
            if not _allclose(x.float(), y.to(x.device).float(), atol=atol, rtol=rtol, equal_nan=True):
                return False
    return True


def _result(name: str, passed: bool, detail: str) -> wire.Check:
    return {"name": name, "passed": bool(passed), "detail": detail}


def _leaves(obj: Any, path: str = "output") -> Iterator[tuple[str, Any]]:
    if isinstance(obj, (tuple, list)) and not isinstance(obj, _Tensor):
        for i, item in enumerate(obj):
            yield from _leaves(item, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for key in obj:
            yield from _leaves(obj[key], f"{path}[{key!r}]")
    else:
        yield path, obj


def _structure(obj: Any) -> Any:
    if isinstance(obj, _Tensor):
        return "tensor"
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_structure(o) for o in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _structure(v)) for k, v in obj.items()))
    return type(obj).__name__


def _check_output_type(ref: Any, cand: Any) -> tuple[wire.Check, list[tuple[str, Any, Any]]]:
    if _structure(ref) != _structure(cand):
        return _result(
            "output_type", False, f"output structure {_describe(cand)} differs from the reference's {_describe(ref)}"
        ), []
    pairs: list[tuple[str, Any, Any]] = []
    for (path, r), (_, c) in zip(_leaves(ref), _leaves(cand)):
        if not isinstance(r, _Tensor):
            if r != c:
                return _result("output_type", False, f"{path} is {c!r}, the reference returns {r!r}"), []
            continue
        problem = _tensor_problem(c)
        if problem is None and tuple(c.shape) != tuple(r.shape):
            problem = f"shape {tuple(c.shape)} differs from the reference's {tuple(r.shape)}"
        if problem is None and c.dtype != r.dtype:
            problem = f"dtype {c.dtype} differs from the reference's {r.dtype}"
        if problem is None and c.device.type != r.device.type:
            problem = f"device {c.device} differs from the reference's {r.device}"
        if problem:
            return _result("output_type", False, f"{path}: {problem}"), []
        pairs.append((path, r, c))
    return _result("output_type", True, f"{len(pairs)} plain tensor output(s) matching the reference"), pairs


def tensor_problem(t: Any) -> str | None:
    """Why `t` is not a plain, materialized tensor (docs/security.md, threat 6), or None."""
    with _DisableTorchFunction():
        return _tensor_problem(t)


def _tensor_problem(t: Any) -> str | None:
    """Why `t` is not a plain, materialized tensor (docs/security.md, threat 6), or None."""
    if type(t) is not _Tensor:
        return f"is a {type(t).__module__}.{type(t).__qualname__}, not a plain torch.Tensor"
    if t.layout != torch.strided:
        return f"has layout {t.layout}; a dense strided tensor is required"
    if t.device.type not in ("cpu", "cuda"):
        return f"lives on device {t.device.type!r}, which has no real storage"
    try:
        storage = t.untyped_storage()
        nbytes = storage.nbytes()
    except Exception as exc:
        return f"has no real storage ({type(exc).__name__})"
    if t.numel() and evidence.extent_bytes(t) + t.storage_offset() * t.element_size() > nbytes:
        return "points outside its storage"
    return None


def _compute_dtype(t: Any) -> Any:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


@dataclass
class _PairStats:
    """Everything the value checks need from one output pair, computed in one sweep.

    Outputs can be large, so the common case (all finite, all within tolerance) costs about a
    dozen passes over the data; the masked, NaN/inf-aware path runs only when that fails.
    """

    path: str
    numel: int
    floating: bool
    n_bad: int = 0
    worst: str = ""
    max_abs: float = 0.0
    ref_norm: float = 0.0
    err_norm: float = 0.0
    usable: int = 0
    ref_spread: float = 0.0
    ref_scale: float = 0.0
    ref_varies: bool = False
    cand_constant: bool = False
    cand_first: float = 0.0
    dtype: Any = None
    # Relative to the float64 reference, where there is one: eager's error and the candidate's.
    eager_rel: float | None = None
    cand_rel: float | None = None


def _as_real(t: Any) -> Any:
    """A complex tensor as real pairs (a trailing dimension of 2); any other tensor as it is."""
    return _view_as_real(t.resolve_conj()) if t.is_complex() else t


def _pair_stats(path: str, r: Any, c: Any, atol: float, rtol: float, exact: Any = None) -> _PairStats:
    c = c.to(r.device)
    if r.is_complex() or c.is_complex():
        if r.is_complex() != c.is_complex():
            st = _PairStats(
                path,
                r.numel(),
                False,
                dtype=r.dtype,
                n_bad=r.numel(),
                worst=f"a {c.dtype} output where the reference's is {r.dtype}",
            )
            return st
        r, c = _as_real(r), _as_real(c)
        exact = _as_real(exact) if exact is not None and exact.is_complex() else None
    st = _PairStats(path, r.numel(), r.is_floating_point(), dtype=r.dtype)
    if st.numel == 0:
        return st
    if not st.floating:
        if not _equal(r, c):
            bad = r != c
            st.n_bad = int(_count_nonzero(bad))
            flat = int(_argmax(bad.reshape(-1).to(torch.uint8)))
            st.worst = (
                f"worst at {_unravel(flat, tuple(r.shape))}: expected {r.reshape(-1)[flat].item()}, "
                f"got {c.reshape(-1)[flat].item()}"
            )
        rmin, rmax = _aminmax(r.reshape(-1))
        st.ref_varies = bool(rmin != rmax)
        cmin, cmax = _aminmax(c.reshape(-1))
        st.cand_constant = bool(cmin == cmax)
        st.cand_first = float(c.reshape(-1)[0])
        return st
    kind = _compute_dtype(r)
    rf, cf = r.to(kind), c.to(kind)
    diff = _sub(cf, rf)
    _abs(diff, out=diff)
    tol = _abs(rf)
    _mul(tol, rtol, out=tol)
    _add(tol, atol, out=tol)
    n_ok = int(_count_nonzero(_le(diff, tol)))
    ref_norm = float(_linalg_vector_norm(rf)) if n_ok == st.numel else math.nan
    # A finite norm means a finite reference: an infinite one has an infinite tolerance,
    # which the comparison above would let anything through.
    if n_ok == st.numel and math.isfinite(ref_norm):
        st.usable = st.numel
        st.ref_norm = ref_norm
        st.err_norm = float(_linalg_vector_norm(diff))
        st.max_abs = float(_amax(diff))
        rmin, rmax = _aminmax(rf.reshape(-1))
    else:
        _masked_stats(st, rf, cf, atol, rtol)
        clean = _nan_to_num(rf, nan=0.0, posinf=0.0, neginf=0.0)
        rmin, rmax = _aminmax(clean.reshape(-1))
    lo, hi = float(rmin), float(rmax)
    st.ref_spread, st.ref_scale = hi - lo, max(abs(lo), abs(hi))
    st.ref_varies = st.ref_spread > 0.0 and st.ref_spread > rtol * st.ref_scale
    cmin, cmax = _aminmax(cf.reshape(-1))
    st.cand_constant = bool(cmin == cmax)
    st.cand_first = float(cf.reshape(-1)[0])
    if exact is not None and exact.shape == r.shape and exact.is_floating_point():
        _anchor(st, rf, cf, exact.to(device=r.device, dtype=torch.float64))
    return st


def _anchor(st: _PairStats, rf: Any, cf: Any, ex: Any) -> None:
    """Eager's and the candidate's relative errors from the float64 reference, over the elements
    where all three are finite."""
    rd, cd = rf.to(torch.float64), cf.to(torch.float64)
    finite = _logical_and(
        _logical_not(_logical_or(_isnan(ex), _isinf(ex))), _logical_not(_logical_or(_isnan(rd), _isinf(rd)))
    )
    zero = _zeros_like(ex)
    exf = _where(finite, ex, zero)
    norm = float(_linalg_vector_norm(exf))
    if not norm > 0.0 or not math.isfinite(norm):
        return
    st.eager_rel = float(_linalg_vector_norm(_where(finite, _sub(rd, ex), zero))) / norm
    cand_diff = _where(finite, _sub(cd, ex), zero)
    st.cand_rel = float(_linalg_vector_norm(_nan_to_num(cand_diff, nan=math.inf))) / norm


def _masked_stats(st: _PairStats, rf: Any, cf: Any, atol: float, rtol: float) -> None:
    """The NaN/inf-aware path: which elements are bad, and norms over the finite reference."""
    diff = _abs(_sub(cf, rf))
    tol = _add(_mul(_abs(rf), rtol), atol)
    nan_r, nan_c = _isnan(rf), _isnan(cf)
    # inf - inf is NaN: equal infinities agree, NaN must meet NaN, and where the reference is
    # infinite its tolerance is too, so only the very same infinity passes there.
    same_special = _logical_or(_logical_and(nan_r, nan_c), _logical_and(_isinf(rf), cf == rf))
    bad = _logical_or(_gt(diff, tol), _logical_xor(nan_r, nan_c))
    bad = _logical_or(bad, _logical_and(_isinf(rf), cf != rf))
    bad = _logical_and(bad, _logical_not(same_special))
    finite_diff = _nan_to_num(diff, nan=0.0, posinf=math.inf)
    st.max_abs = float(_amax(finite_diff))
    st.n_bad = int(_count_nonzero(bad))
    if st.n_bad:
        excess = _where(bad, _nan_to_num(finite_diff, posinf=1e300) + 1.0, _zeros_like(finite_diff))
        flat = int(_argmax(excess.reshape(-1)))
        st.worst = (
            f"worst at {_unravel(flat, tuple(rf.shape))}: expected {float(rf.reshape(-1)[flat]):.6g}, "
            f"got {float(cf.reshape(-1)[flat]):.6g}"
        )
    usable = _logical_not(_logical_or(_isnan(rf), _isinf(rf)))
    st.usable = int(_count_nonzero(usable))
    st.ref_norm = float(_linalg_vector_norm(_where(usable, rf, _zeros_like(rf))))
    st.err_norm = float(_linalg_vector_norm(_where(usable, _nan_to_num(diff, nan=math.inf), _zeros_like(diff))))


def _check_correctness(stats: list[_PairStats], atol: float, rtol: float) -> wire.Check:
    worst_abs = max((st.max_abs for st in stats), default=0.0)
    for st in stats:
        if st.n_bad:
            where = f"; {st.worst}" if st.worst else ""
            kind = f"atol={atol:g} rtol={rtol:g}" if st.floating else "exact dtype"
            return _result(
                "correctness",
                False,
                f"{st.path}: {st.n_bad}/{st.numel} elements outside {kind}{where}; max abs err {st.max_abs:.3g}",
            )
    return _result("correctness", True, f"max abs err {worst_abs:.3g} (atol={atol:g} rtol={rtol:g})")


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for dim in reversed(shape):
        index.append(flat % dim if dim else 0)
        flat = flat // dim if dim else 0
    return tuple(reversed(index))


def relative_error_threshold(ref_rms: float, dtype: Any, atol: float, rtol: float) -> float:
    """The allowed ||cand - ref|| / ||ref||.

    Where the reference's values are well above atol, rtol (or the dtype's rounding, for
    half precision) bounds it. Where the whole reference sits inside the atol band, allclose
    is vacuous (zeros pass it), so the bound only rejects outputs unrelated to the reference:
    a zero or constant output scores 1.0 there, an honest one far less.
    """
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    if ref_rms < atol:
        return 0.5
    return max(rtol, 8.0 * eps)


def _check_relative_error(stats: list[_PairStats], atol: float, rtol: float, mode: str = "kernelbench") -> wire.Check:
    worst = 0.0
    for st in stats:
        if not st.floating or st.numel == 0:
            continue
        n = max(1, st.usable)
        if st.ref_norm == 0.0:
            if st.err_norm / math.sqrt(n) > atol:
                return _result(
                    "relative_error",
                    False,
                    f"{st.path}: the reference is zero but the output's RMS is {st.err_norm / math.sqrt(n):.3g}",
                )
            continue
        dtype = str(st.dtype)
        if st.cand_rel is not None and st.eager_rel is not None:
            # Judged from the float64 truth against eager's own error (tools/precision.py).
            limit = precision.limit(dtype, st.eager_rel, mode, rtol)
            worst = max(worst, st.cand_rel)
            if not st.cand_rel <= limit:
                return _result(
                    "relative_error",
                    False,
                    f"{st.path}: the error from the float64 reference, "
                    f"{st.cand_rel:.3g} of its norm, exceeds {limit:.3g} (eager's own is "
                    f"{st.eager_rel:.3g}; {precision.rule(mode)})",
                )
            continue
        ratio = st.err_norm / st.ref_norm
        if mode == "kernelbench":
            limit = relative_error_threshold(st.ref_norm / math.sqrt(n), st.dtype, atol, rtol)
        else:
            # No float64 truth (a reference that cannot run in float64): eager's output stands in,
            # with room for eager's own error beside the candidate's.
            limit = 2.0 * precision.floor(dtype, mode)
        worst = max(worst, ratio)
        if not ratio <= limit:
            return _result(
                "relative_error",
                False,
                f"{st.path}: ||out - ref|| / ||ref|| = {ratio:.3g} exceeds "
                f"{limit:.3g}; the output does not follow the reference's scale",
            )
    return _result(
        "relative_error",
        True,
        f"max relative error {worst:.3g} (from the float64 reference where there is one, {precision.rule(mode)})",
    )


def _check_nonconstant(stats: list[_PairStats]) -> wire.Check:
    for st in stats:
        if st.numel >= 2 and st.ref_varies and st.cand_constant:
            return _result(
                "nonconstant", False, f"{st.path} is the constant {st.cand_first:.6g} where the reference varies"
            )
    return _result("nonconstant", True, "outputs vary where the reference varies")


def _describe(obj: Any) -> str:
    s = _structure(obj)
    return str(s) if not isinstance(s, str) else s
