"""Locked: small, exact evidence about one candidate call, and the judge's checks on it.

The candidate process records raw facts right after a call returns (and after a device-wide
sync): a bit-exact fingerprint of every input it was handed, and the byte range of every input
and output. The facts travel in the result JSON, a few hundred bytes, instead of the inputs
themselves, which for a large task are hundreds of megabytes per seed. The judge computes the
same fingerprints on its own pristine copy of the inputs and decides; nothing here decides in
the candidate's process.

Fingerprint, where no digest is taken (below): shape, dtype and two sums over the tensor's
bytes read as 64-bit words, a plain one and one weighted by position, both in wrapping int64 arithmetic. Modular sums are exact
whatever the reduction order, so equal tensors always agree, and any changed, swapped or moved
word changes the weighted sum. It runs on the tensor's own device: a 64 MB input costs well
under a millisecond on a GPU and a few tens of milliseconds on a CPU.

Sums are a checksum, not a commitment: whoever knows the weights can change a few words of an
output so that both sums stay the same. An output committed by its sums could be filled in
later, after its call was timed, and adjusted to the sums of what the call really returned.
So wherever a tensor's bytes are in host memory (every tensor on the CPU device, and CUDA
tensors up to DIGEST_CUDA_BYTES, copied to the host for it), its fingerprint is a SHA-256
digest of its bytes instead: no other bytes have that digest, so what the judge is handed is
what the call returned when its clock stopped. SHA-256 rather than BLAKE2b: with the CPU's SHA
instructions it hashes about twice as fast (1.7 against 0.9 GB/s on the dev machine), and on
the CPU the digests of every timed call's inputs and outputs are most of the harness's own
work around the call. Every process of one evaluation calls `session_device` first, so all of
them agree on which tensors carry a digest.
"""

from __future__ import annotations

import ctypes
import hashlib
from typing import TYPE_CHECKING, Any, Sequence, overload

import leaves
import torch

if TYPE_CHECKING:
    import wire

# Captured at import, before any candidate code runs in this process.
_Tensor = torch.Tensor
_DisableTorchFunction = torch._C.DisableTorchFunction
_arange = torch.arange
_stack = torch.stack
_sum = torch.sum
_mul = torch.mul
_bitwise_or = torch.bitwise_or
_int64, _uint8 = torch.int64, torch.uint8
_sha256 = hashlib.sha256
_c_char = ctypes.c_char

# CUDA outputs larger than this are fingerprinted by their sums only: copying and hashing them
# for every timed call would cost more than the calls (docs/security.md).
DIGEST_CUDA_BYTES = 8 << 20
_digest_limit = [float("inf")]


def session_device(device: str) -> None:
    """The evaluation's device decides which tensors carry a digest, wherever they are."""
    _digest_limit[0] = float("inf") if device == "cpu" else DIGEST_CUDA_BYTES


_CHUNK = 1 << 22
_MASK = (1 << 64) - 1
_weights: dict[str, Any] = {}


def _position_weights(device: Any) -> Any:
    """Odd, scrambled int64 weights for word positions within a chunk (made once per device)."""
    key = str(device)
    if key not in _weights:
        index = _arange(_CHUNK, device=device, dtype=_int64)
        # Wrapping int64 multiply by a 64-bit odd constant scatters the positions.
        _weights[key] = _bitwise_or(_mul(index, -7046029254386353131), 1)
    return _weights[key]


def _as_words(t: Any) -> tuple[Any, Any]:
    """The tensor's bytes as int64 words, and the 0-7 bytes left over as int64 values."""
    flat = t.detach().contiguous().reshape(-1).view(_uint8)
    body = flat.numel() // 8 * 8
    try:
        words = flat[:body].view(_int64)
    except RuntimeError:  # a view starting at an offset that is not 8-byte aligned
        words = flat[:body].clone().view(_int64)
    return words, flat[body:].to(_int64)


@overload
def fingerprint(obj: list[Any] | tuple[Any, ...]) -> list[wire.Fingerprint]: ...
@overload
def fingerprint(obj: Any) -> wire.Fingerprint: ...
def fingerprint(obj: Any) -> wire.Fingerprint:
    """A JSON-able, bit-exact digest of one input (tensors) or its repr (anything else), nested
    as the object is: lists and tuples as lists, dicts, dataclasses and other records as
    {"fields": {key: fingerprint}} (tools/leaves.py walks a real object and its stand-in alike)."""
    children = leaves.items(obj)
    if children is not None:
        if leaves.is_sequence(obj):
            return [fingerprint(value) for _, value in children]
        return {"fields": {str(key): fingerprint(value) for key, value in children}}
    if not isinstance(obj, _Tensor):
        return {"value": repr(obj)}
    with _DisableTorchFunction(), torch.no_grad():
        digest = _digest(obj)
        if digest is not None:
            return {"shape": list(obj.shape), "dtype": str(obj.dtype), "digest": digest}
        words, tail = _as_words(obj)
        sums = [_sum(tail), _sum(_mul(tail, _arange(1, tail.numel() + 1, device=tail.device, dtype=_int64)))]
        if words.numel():
            weights = _position_weights(words.device)
            for start in range(0, words.numel(), _CHUNK):
                part = words[start : start + _CHUNK]
                sums.append(_sum(part))
                sums.append(_sum(_mul(part, weights[: part.numel()])))
        values = [int(v) for v in _stack(sums).tolist()]
    plain = weighted = 0
    for i in range(0, len(values), 2):
        plain = (plain + values[i]) & _MASK
        weighted = (weighted * 1_000_003 + values[i + 1]) & _MASK
    return {"shape": list(obj.shape), "dtype": str(obj.dtype), "sum": plain, "weighted": weighted}


def _digest(t: Any) -> str | None:
    """SHA-256 of the tensor's bytes in element order, or None for a large CUDA tensor."""
    nbytes = t.numel() * t.element_size()
    if nbytes > _digest_limit[0]:
        return None
    if t.device.type != "cpu":
        t = t.detach().to("cpu")
    flat = t.detach().contiguous()
    if nbytes == 0:
        return _sha256(b"").hexdigest()
    # Hashed where the tensor lies, without a copy.
    return _sha256((_c_char * nbytes).from_address(flat.data_ptr())).hexdigest()


def extent_bytes(t: Any) -> int:
    """How many bytes the tensor's elements span, from its lowest to its highest address."""
    if t.numel() == 0:
        return 0
    last = sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
    return int((last + 1) * t.element_size())


def _byte_range(t: Any) -> list[Any]:
    """[device, first byte, one past the last byte] of the memory the tensor can read."""
    start = t.data_ptr()
    start += sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if st < 0) * t.element_size()
    return [str(t.device), start, start + extent_bytes(t)]


def byte_ranges(obj: Any) -> list[list[Any]]:
    """The byte range of every plain tensor in `obj` (a tensor, or any container of them)."""
    with _DisableTorchFunction():
        return [_byte_range(t) for t in leaves.tensors(obj) if type(t) is _Tensor]


def call_evidence(inputs_after: Sequence[Any], output: Any) -> wire.CallEvidence:
    """What the judge needs to check inputs and aliasing for one call: raw facts, no verdicts."""
    return {
        "inputs_after": fingerprint(list(inputs_after)),
        "input_ranges": byte_ranges(list(inputs_after)),
        "output_ranges": byte_ranges(output),
    }


def _result(name: str, passed: bool, detail: str) -> wire.Check:
    return {"name": name, "passed": bool(passed), "detail": detail}


def _fingerprint_leaves(fp: Any, path: str = "") -> list[tuple[str, Any]]:
    """(path, leaf fingerprint) for every leaf of a nested fingerprint."""
    if isinstance(fp, list):
        return [pair for i, item in enumerate(fp) for pair in _fingerprint_leaves(item, f"{path}[{i}]")]
    if isinstance(fp, dict) and set(fp) == {"fields"} and isinstance(fp["fields"], dict):
        return [pair for key, item in fp["fields"].items() for pair in _fingerprint_leaves(item, f"{path}.{key}")]
    return [(path, fp)]


def check_inputs_unchanged(
    before: list[wire.Fingerprint], after: object, reference_after: list[wire.Fingerprint] | None = None
) -> wire.Check:
    """inputs_unchanged: the fingerprints of the pristine inputs against those after the call,
    leaf by leaf, in every container. Where the reference itself changes an input in place
    (`reference_after`: its inputs after its own call), that leaf must change too, and every
    other must stay as it was."""
    was, now = _fingerprint_leaves(before), _fingerprint_leaves(after)
    if not isinstance(after, list) or [p for p, _ in was] != [p for p, _ in now]:
        return _result("inputs_unchanged", False, "the number or structure of the inputs changed")
    theirs = dict(_fingerprint_leaves(reference_after)) if reference_after is not None else {}
    for (path, b), (_, a) in zip(was, now):
        where = f"input {path}"
        if path in theirs and theirs[path] != b:
            # The reference writes this input in place: a user may rely on that too.
            if a == b:
                return _result(
                    "inputs_unchanged", False, f"the reference changes {where} in place; ModelNew left it as it was"
                )
            continue
        if not isinstance(b, dict):
            if b != a:
                return _result("inputs_unchanged", False, f"{where} changed")
        elif "value" in b:
            if b != a:
                return _result(
                    "inputs_unchanged",
                    False,
                    f"{where} changed from {b['value']} to {a.get('value') if isinstance(a, dict) else a!r}",
                )
        elif not isinstance(a, dict) or a.get("shape") != b["shape"] or a.get("dtype") != b["dtype"]:
            return _result("inputs_unchanged", False, f"{where} changed shape or dtype")
        elif a != b:
            return _result("inputs_unchanged", False, f"{where} was modified in place; inputs must be read-only")
    if any(theirs.get(path) not in (None, b) for path, b in was):
        return _result(
            "inputs_unchanged", True, "inputs changed in place where the reference changes them, and only there"
        )
    return _result("inputs_unchanged", True, "inputs are bit-identical to the saved copies")


def check_aliasing(output_ranges: list[list[Any]], input_ranges: list[list[Any]]) -> wire.Check:
    """aliasing: no output may share a byte with an input."""
    for o_index, (o_dev, o_lo, o_hi) in enumerate(output_ranges):
        if o_hi <= o_lo:
            continue
        for i_index, (i_dev, i_lo, i_hi) in enumerate(input_ranges):
            if i_dev == o_dev and i_hi > i_lo and o_lo < i_hi and i_lo < o_hi:
                return _result(
                    "aliasing", False, f"output {o_index} shares memory with input {i_index}; return a new tensor"
                )
    return _result("aliasing", True, "outputs do not share memory with inputs")
