"""check's pure parts: the regression rule, statuses and exit codes, thresholds, fingerprints, the
manifest format and its migration."""

import hashlib
import tomllib

import pytest

from cuda_agent_cli.check.runner import touches
from cuda_agent_cli.check.status import (
    Finding,
    Status,
    compare,
    decide,
    exit_code,
    parse_threshold,
    slower_than_compile,
)
from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.task.inputs import parse_inputs_spec
from cuda_agent_cli.writeback.fingerprint import class_fingerprint, integration_present, unpatched_candidates
from cuda_agent_cli.writeback.integrate import Verified, patch_module
from cuda_agent_cli.writeback.manifest import MANIFEST_VERSION, load_manifest, render_manifest, replaced_entries

# ---------------------------------------------------------------- the regression rule


def test_a_drop_beyond_the_threshold_with_separate_intervals_is_a_regression():
    c = compare(2.0, [1.95, 2.05], 1.6, [1.55, 1.65])
    assert c.verdict == "regressed" and c.significant and round(c.change, 2) == -0.20


def test_a_drop_inside_three_times_the_spread_is_noise():
    # 20% down, but the measured interval is +-10%: 3x spread = 30% > 20%.
    assert compare(2.0, [1.95, 2.05], 1.6, [1.44, 1.76]).verdict == "same"


def test_a_wide_interval_never_hides_a_collapse():
    # A busy machine: the measured interval is +-60%. 3x spread is 180%, more than any drop can
    # be; taken as a factor (recorded / 2.8) it still sees 1000x fall to 5x.
    assert compare(1000.0, [990.0, 1010.0], 5.0, [2.0, 8.0]).verdict == "regressed"
    assert compare(2.0, [1.95, 2.05], 1.0, [0.4, 1.6]).verdict == "same"  # 50% down, inside 2.8x


def test_overlapping_intervals_are_not_significant_even_past_the_threshold():
    c = compare(2.0, [1.5, 2.5], 1.8, [1.78, 1.82])
    assert c.verdict == "same" and not c.significant


def test_the_threshold_can_be_raised():
    assert compare(2.0, None, 1.8, None).verdict == "regressed"  # -10% > 5%
    assert compare(2.0, None, 1.8, None, threshold=0.15).verdict == "same"
    assert "threshold only" in compare(2.0, None, 1.8, None).detail


def test_more_than_ten_percent_faster_is_improved():
    assert compare(2.0, [1.98, 2.02], 2.3, [2.28, 2.32]).verdict == "improved"
    assert compare(2.0, [1.98, 2.02], 2.1, [2.08, 2.12]).verdict == "same"  # +5%


def test_slower_than_compile_only_when_the_record_was_not():
    assert slower_than_compile([0.8, 0.9], 0.85, 1.3, [1.25, 1.35])
    assert not slower_than_compile([0.9, 1.05], 0.97, 1.3, None)  # interval reaches 1.0
    assert not slower_than_compile([0.8, 0.9], 0.85, 0.9, None)  # applied while slower


def test_one_status_per_kernel_and_the_exit_codes():
    f = [Finding(Status.IMPROVED, "x"), Finding(Status.STALE, "y"), Finding(Status.NOT_MEASURED, "z")]
    assert decide(f) == Status.STALE and decide([]) == Status.OK
    assert decide([Finding(Status.NOT_MEASURED, "z"), Finding(Status.IMPROVED, "x")]) == Status.NOT_MEASURED
    assert exit_code([Status.OK, Status.IMPROVED, Status.NOT_MEASURED]) == 0
    assert exit_code([Status.NOT_MEASURED], strict=True) == 1
    for failing in ("STALE", "BROKEN", "REGRESSED", "SLOWER-THAN-COMPILE", "NEW-ARCH"):
        assert exit_code([Status.OK, Status(failing)]) == 1


def test_thresholds_as_fractions_or_percentages():
    assert parse_threshold("5%", "--threshold") == pytest.approx(0.05)
    assert parse_threshold(0.1, "x") == pytest.approx(0.1)
    for bad in ("abc", "0", "150%", -0.1):
        with pytest.raises(BadInput):
            parse_threshold(bad, "--threshold")


# ---------------------------------------------------------------- fingerprints

MODULE = '''import torch


class Block(torch.nn.Module):
    """A block."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.w
'''


def test_fingerprint_ignores_comments_formatting_and_docstrings_but_not_code():
    base = class_fingerprint(MODULE, "Block")
    cosmetic = MODULE.replace('"""A block."""', '"""Another text."""').replace(
        "return x * self.w", "return (x   *   self.w)  # same"
    )
    assert class_fingerprint(cosmetic, "Block").sha256 == base.sha256
    assert class_fingerprint(MODULE.replace("x * self.w", "x + self.w"), "Block").sha256 != base.sha256
    changed = class_fingerprint(MODULE.replace("def forward(self, x)", "def forward(self, x, y=None)"), "Block")
    assert changed.signature != base.signature and "y=None" in changed.signature
    assert class_fingerprint(MODULE, "Missing") is None


def test_the_module_before_the_patch_is_recovered_for_version_1_records():
    v = Verified(
        device="cpu",
        call=parse_inputs_spec("x=float32[4,8]; init: 8"),
        forward_params=("x",),
        parameters=(("w", "float32", (8,)),),
        training_sensitive=False,
    )
    for original in (MODULE, MODULE + "\n\ndef helper():\n    return 1\n", MODULE + "def helper():\n    return 1\n"):
        end = len(MODULE.splitlines())
        patched = patch_module(original, "Block", "block", end, v)
        assert integration_present(patched, "Block") and not integration_present(original, "Block")
        digest = hashlib.sha256(original.encode()).hexdigest()
        assert digest in {hashlib.sha256(t.encode()).hexdigest() for t in unpatched_candidates(patched, "Block")}


# ---------------------------------------------------------------- manifest format

V1 = """# an old manifest

[[kernel]]
target = "pkg/blocks.py::FancyBlock"
class = "FancyBlock"
module = "pkg.blocks"
reference_sha256 = "abc"
inputs = "float32[8]"
device = "cpu"
gpu = ""
speedup_vs_eager = 1.5
input_spec = "{\\"source\\":\\"get_inputs\\",\\"args\\":[],\\"init\\":[]}"
future_key = "kept"
"""


def test_version_1_is_migrated_on_reading():
    m = load_manifest(V1)
    assert m.version == 1
    e = m.kernels[0]
    assert e["module_sha256"] == "abc" and "reference_sha256" not in e
    assert e["module_file"] == "pkg/blocks.py" and e["folder"] == "pkg/_cuda_agent/fancy_block"
    assert e["inputs_source"] == "get_inputs" and e["future_key"] == "kept" and e["migrated_from"] == 1


def test_version_2_round_trips_with_file_hashes_as_a_table():
    entry = {
        "target": "a.py::A",
        "folder": "_cuda_agent/a",
        "speedup_vs_eager_interval": [1.4, 1.6],
        "files": {"kernels/a.cu": "1" * 64, "model_new.py": "2" * 64},
    }
    text = render_manifest([entry])
    data = tomllib.loads(text)
    assert data["version"] == MANIFEST_VERSION and data["kernel"][0]["files"]["kernels/a.cu"] == "1" * 64
    assert load_manifest(text).kernels == [entry]
    again = replaced_entries(text, {"a.py::A": {**entry, "speedup_vs_eager_interval": [2.0, 2.2]}})
    assert load_manifest(again).kernels[0]["speedup_vs_eager_interval"] == [2.0, 2.2]


@pytest.mark.parametrize(
    "text,what",
    [
        ("version = 3\n", "newer than this cuda-agent reads"),
        ("version = 'two'\n", "must be a positive integer"),
        ("[[kernel]]\ndevice = 'cpu'\n", "has no `target`"),
        ("kernel = 1\n", "array of tables"),
        ("[[kernel]\n", "not valid TOML"),
    ],
)
def test_a_manifest_this_version_cannot_read_is_bad_input(text, what):
    with pytest.raises(BadInput) as info:
        load_manifest(text)
    assert what in info.value.one_line()


def test_which_kernels_a_set_of_files_touches():
    e = {"module_file": "pkg/blocks.py", "folder": "pkg/_cuda_agent/block"}
    assert touches(e, {"pkg/blocks.py"}) and touches(e, {"pkg/_cuda_agent/block/kernels/k.cu"})
    assert touches(e, {".cuda-agent/kernels.toml"})
    assert not touches(e, {"pkg/other.py", "pkg/_cuda_agent/block2/loader.py"})


# ---------------------------------------------------------------- architecture against this machine

from cuda_agent_cli.check.static import environment_findings  # noqa: E402
from cuda_agent_cli.machine import Gpu, Machine, cuda_major, torch_release  # noqa: E402

H200 = Machine(
    torch="2.13.0+cu128", cuda="12.8", cpu_arch="x86_64", cpu_name="cpu", gpus=(Gpu("NVIDIA H200", "sm_90"),)
)
CUDA_ENTRY = {"device": "cuda", "arch": "sm_90", "gpu": "NVIDIA H200", "torch": "2.13.1+cu128", "cuda": "12.8"}


def test_versions_compare_by_release_and_major():
    assert torch_release("2.13.0+cu128") == "2.13" and torch_release(None) is None
    assert cuda_major("12.8") == "12" and cuda_major("") is None


def test_the_same_gpu_and_versions_give_no_finding():
    assert environment_findings(CUDA_ENTRY, H200) == []


@pytest.mark.parametrize(
    "changes,status,words",
    [
        (
            {"arch": "sm_80", "gpu": "NVIDIA A100"},
            Status.NEW_ARCH,
            "verified on sm_80 (NVIDIA A100), this machine has sm_90",
        ),
        ({"torch": "2.12.0+cu128"}, Status.NEW_ARCH, "torch 2.12.0+cu128"),
        ({"cuda": "13.0"}, Status.NEW_ARCH, "CUDA 13.0"),
    ],
)
def test_another_architecture_or_version_is_new_arch(changes, status, words):
    found = environment_findings({**CUDA_ENTRY, **changes}, H200)
    assert [f.status for f in found] == [status] and words in found[0].message


def test_a_cuda_kernel_without_a_gpu_or_cuda_torch_is_not_measured():
    no_gpu = Machine(torch="2.13.0+cu128", cuda="12.8", cpu_arch="x86_64", cpu_name="cpu", gpus=())
    cpu_torch = Machine(torch="2.13.0+cpu", cuda=None, cpu_arch="x86_64", cpu_name="cpu", gpus=())
    assert [f.code for f in environment_findings(CUDA_ENTRY, no_gpu)] == ["no-gpu"]
    assert [f.code for f in environment_findings(CUDA_ENTRY, cpu_torch)] == ["no-cuda"]
    assert environment_findings({"device": "cpu", "arch": "x86_64", "torch": "2.13.0"}, cpu_torch) == []


def test_the_full_check_without_torch_is_an_environment_error(tmp_path, monkeypatch):
    import cuda_agent_cli.machine as machine
    from cuda_agent_cli.check.runner import CheckRequest, run_check
    from cuda_agent_cli.errors import EnvironmentMissing

    (tmp_path / ".git").mkdir()
    (tmp_path / ".cuda-agent").mkdir()
    (tmp_path / ".cuda-agent" / "kernels.toml").write_text(render_manifest([{"target": "a.py::A", "device": "cpu"}]))
    monkeypatch.setattr(
        machine, "this_machine", lambda: Machine(torch=None, cuda=None, cpu_arch="x86_64", cpu_name="cpu", gpus=())
    )
    with pytest.raises(EnvironmentMissing):
        run_check(CheckRequest(cwd=tmp_path))
    fast = run_check(CheckRequest(cwd=tmp_path, fast=True))
    assert fast.kernels[0].status == Status.BROKEN and fast.exit_code == 1  # no module_file recorded


def test_a_machine_whose_gpus_cannot_be_listed_is_not_called_gpu_less():
    unknown = Machine(torch="2.13.0+cu128", cuda="12.8", cpu_arch="x86_64", cpu_name="cpu", gpus=(), gpus_known=False)
    assert [f.code for f in environment_findings(CUDA_ENTRY, unknown)] == ["gpu-unknown"]
