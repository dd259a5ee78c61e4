"""Outputs handed from the candidate's process to the judge: raw bytes plus a validated header."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from cuda_agent_cli.resources import tools_dir

sys.path.insert(0, str(tools_dir()))  # the locked job modules import each other by name
import evidence  # noqa: E402
import tensor_files  # noqa: E402


def roundtrip(obj, tmp_path: Path):
    tensor_files.save_outputs(obj, tmp_path / "out")
    return tensor_files.load_outputs(tmp_path / "out")


def test_tensors_and_nesting_come_back_bit_exact(tmp_path: Path) -> None:
    a = torch.randn(3, 5)
    b = torch.arange(7, dtype=torch.int64)
    c = torch.tensor([True, False, True])
    h = torch.randn(4, 4).to(torch.bfloat16)
    back = roundtrip((a, [b, (c, h)], torch.tensor(2.5), torch.empty(0, 3)), tmp_path)
    assert isinstance(back, tuple) and isinstance(back[1], list) and isinstance(back[1][1], tuple)
    assert torch.equal(back[0], a) and torch.equal(back[1][0], b) and torch.equal(back[1][1][0], c)
    assert torch.equal(back[1][1][1], h) and back[2].shape == () and back[2].item() == 2.5
    assert back[3].shape == (0, 3)


def test_strided_views_are_written_as_their_values(tmp_path: Path) -> None:
    base = torch.randn(8, 6)
    view = base.t()[1:5, ::2]
    back = roundtrip(view, tmp_path)
    assert torch.equal(back, view) and back.is_contiguous()


def test_the_judge_gets_its_own_memory_not_a_view_of_the_file(tmp_path: Path) -> None:
    x = torch.randn(100)
    back = roundtrip(x, tmp_path)
    (tmp_path / "out.bin").write_bytes(b"\0" * (tmp_path / "out.bin").stat().st_size)
    assert torch.equal(back, x)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h: h["tensors"][0].update(nbytes=10**9),
        lambda h: h["tensors"][0].update(offset=-64),
        lambda h: h["tensors"][0].update(dtype="torch.float8_e4m3fn_fake"),
        lambda h: h["tensors"][0].update(device="meta"),
        lambda h: h["tensors"][0].update(shape=[-1, 4]),
        lambda h: h.update(structure={"tensor": 3}),
        lambda h: h.update(structure={"dict": []}),
        lambda h: h.update(size=1),
    ],
)
def test_a_header_that_does_not_describe_the_data_is_refused(tmp_path: Path, tamper) -> None:
    tensor_files.save_outputs(torch.randn(4, 4), tmp_path / "out")
    header = json.loads((tmp_path / "out.json").read_text())
    tamper(header)
    (tmp_path / "out.json").write_text(json.dumps(header))
    with pytest.raises(tensor_files.UnreadableOutput):
        tensor_files.load_outputs(tmp_path / "out")


@pytest.mark.parametrize(
    "device, numel", [("cpu", 1 << 20), ("cuda", (evidence.DIGEST_CUDA_BYTES >> 2) + 1)], ids=["digest", "sums"]
)
def test_fingerprints_tell_any_changed_or_moved_word_and_agree_on_equal_tensors(device: str, numel: int) -> None:
    # On the CPU device every tensor is fingerprinted by its digest; in a CUDA evaluation one over
    # DIGEST_CUDA_BYTES by its two sums (here a CPU tensor stands in for it: the rule is the size).
    evidence.session_device(device)
    try:
        x = torch.randn(numel)
        fp = evidence.fingerprint([x, 3])
        assert ("digest" in fp[0]) == (device == "cpu") and ("sum" in fp[0]) == (device != "cpu")
        assert evidence.fingerprint([x.clone(), 3]) == fp
        changed = x.clone()
        changed[12345] = changed[12345].item() + 1e-3
        assert evidence.fingerprint([changed, 3]) != fp
        swapped = x.clone()
        swapped[[0, 1, 2, 3]] = x[[2, 3, 0, 1]]  # two 8-byte words trade places: the plain sum is blind to it
        after = evidence.fingerprint([swapped, 3])
        assert after != fp
        if device != "cpu":
            assert after[0]["sum"] == fp[0]["sum"]
        assert evidence.fingerprint([x, 4]) != fp
        odd = torch.arange(13, dtype=torch.uint8)
        tail_changed = odd.clone()
        tail_changed[12] = 0
        assert evidence.fingerprint(odd) != evidence.fingerprint(tail_changed)
        misaligned = torch.randn(101)[1:]
        assert evidence.fingerprint(misaligned) == evidence.fingerprint(misaligned.clone())
        strided = torch.randn(64, 32)[:, 1:]
        assert evidence.fingerprint(strided) == evidence.fingerprint(strided.contiguous())
    finally:
        evidence.session_device("cpu")


def test_inputs_unchanged_and_aliasing_decided_from_the_evidence() -> None:
    x = torch.randn(64)
    out = torch.empty(64)
    proof = evidence.call_evidence([x], out)
    assert evidence.check_inputs_unchanged(evidence.fingerprint([x]), proof["inputs_after"])["passed"]
    assert evidence.check_aliasing(proof["output_ranges"], proof["input_ranges"])["passed"]
    before = evidence.fingerprint([x.clone()])
    x.mul_(2)
    mutated = evidence.call_evidence([x], x[8:16])
    assert not evidence.check_inputs_unchanged(before, mutated["inputs_after"])["passed"]
    assert not evidence.check_aliasing(mutated["output_ranges"], mutated["input_ranges"])["passed"]


def test_many_outputs_are_handed_over_side_by_side_and_a_bad_one_spoils_only_itself(tmp_path: Path):
    outs = [torch.randn(64, 33) * k for k in range(7)] + [(torch.arange(5), [torch.ones(2, 2)])]
    items = [(o, tmp_path / f"call_{k}") for k, o in enumerate(outs)]
    items.append(({"not": "a tensor"}, tmp_path / "bad"))
    errors = tensor_files.save_many(items, threads=3)
    assert len(errors) == 1 and not tensor_files.exists(tmp_path / "bad")
    for k, o in enumerate(outs):
        back = tensor_files.load_outputs(tmp_path / f"call_{k}")
        if isinstance(o, tuple):
            assert torch.equal(back[0], o[0]) and torch.equal(back[1][0], o[1][0])
        else:
            assert torch.equal(back, o)
