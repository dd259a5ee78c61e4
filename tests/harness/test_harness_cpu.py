"""The whole harness on the CPU device: real ninja builds, forked workers, real checks.

One session workspace is built once for the module; tests swap model_new.py (which needs no
rebuild) and add kernel files only when the test is about compiling.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from cuda_agent_cli.harness import Harness
from cuda_agent_cli.workspace import Workspace, create_workspace

pytestmark = pytest.mark.integration

REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return (a + b) * self.scale


def get_inputs():
    return [torch.randn(64, 512), torch.randn(64, 512)]


def get_init_inputs():
    return [0.5]
"""

# Light headers keep each kernel file at a few seconds on two cores.
KERNELS = r"""
#include <torch/csrc/utils/pybind.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <chrono>
#include "../binding_registry.h"

static at::Tensor add_scale(const at::Tensor& a, const at::Tensor& b, double scale, float bias) {
  auto ac = a.contiguous();
  auto bc = b.contiguous();
  auto out = at::empty_like(ac);
  const float* x = ac.data_ptr<float>();
  const float* y = bc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < ac.numel(); ++i) o[i] = (x[i] + y[i]) * static_cast<float>(scale) + bias;
  return out;
}

at::Tensor add_scaled(const at::Tensor& a, const at::Tensor& b, double scale) { return add_scale(a, b, scale, 0.f); }
at::Tensor add_scaled_wrong(const at::Tensor& a, const at::Tensor& b, double scale) { return add_scale(a, b, scale, 0.25f); }
// Right when its calls are apart, wrong when they come back to back (as in a burst).
at::Tensor add_scaled_apart(const at::Tensor& a, const at::Tensor& b, double scale) {
  static auto last = std::chrono::steady_clock::time_point{};
  bool close = std::chrono::steady_clock::now() - last < std::chrono::microseconds(200);
  auto out = add_scale(a, b, scale, close ? 0.25f : 0.f);
  last = std::chrono::steady_clock::now();
  return out;
}
at::Tensor crash(const at::Tensor& a) { *(volatile int*)nullptr = 1; return a; }
at::Tensor spin(const at::Tensor& a) { volatile int stop = 0; while (!stop) {} return a; }

static void register_add(pybind11::module& m) {
  m.def("add_scaled", &add_scaled);
  m.def("add_scaled_wrong", &add_scaled_wrong);
  m.def("add_scaled_apart", &add_scaled_apart);
  m.def("crash", &crash);
  m.def("spin", &spin);
}
REGISTER_BINDING(add, register_add);
"""


def candidate(forward_body: str, extra_init: str = "") -> str:
    return f"""
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
{extra_init}
    def forward(self, a, b):
{forward_body}
"""


CORRECT = candidate("        return cuda_extension.add_scaled(a, b, self.scale)")
WRONG = candidate("        return cuda_extension.add_scaled_wrong(a, b, self.scale)")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, harness_cache_root: Path) -> Iterator[Workspace]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(harness_cache_root))
        ws = create_workspace(tmp_path_factory.mktemp("session"), REFERENCE, CORRECT, {"add.cpp": KERNELS})
        result = Harness(ws, device="cpu").compile()
        assert result.compiled, result.summary()
        yield ws


@pytest.fixture
def ws(built: Workspace, harness_cache: Path) -> Workspace:
    built.candidate.write_text(CORRECT)
    return built


def failed(result) -> dict[str, str]:
    return {c.name: c.detail for c in result.failed_checks()}


def test_correct_kernel_passes_every_check(ws: Workspace) -> None:
    result = Harness(ws, device="cpu").verify()
    assert result.correct and result.compiled and result.reward is None, result.summary()
    names = {c.name for c in result.checks}
    assert {
        "lock",
        "static",
        "compile",
        "import",
        "correctness",
        "inputs_unchanged",
        "aliasing",
        "determinism",
        "extension_kernel",
        "threads",
        "harness_integrity",
        "precision_flags",
    } <= names
    assert result.to_json()["timings"] is None


def test_a_warmed_worker_loads_torch_compile_once_and_scores_as_before(ws: Workspace) -> None:
    from cuda_agent_cli.harness import warm_worker

    first = warm_worker()
    assert first.get("warm") is True and first.get("compiler_s", -1) >= 0, first
    assert warm_worker().get("compiler_s") == 0.0  # once per worker
    result = Harness(ws, device="cpu", trials=10, warmup=2).profile()
    assert result.correct and result.timings is not None, result.summary()


def test_profile_of_a_correct_kernel_earns_a_positive_reward(ws: Workspace) -> None:
    result = Harness(ws, device="cpu", trials=10, warmup=2).profile()
    assert result.correct and result.reward is not None and result.reward >= 1, result.summary()
    t = result.timings
    # 10 timed calls, or 40 where a loaded machine had the profile timed again in longer blocks.
    calls = 40 if any("timed again" in w for w in result.warnings) else 10
    assert t is not None and t.trials == calls and t.candidate_us > 0 and t.eager_us > 0 and t.compile_us > 0
    assert t.method.startswith(
        (
            "thread-cpu-time+fresh-inputs+fixed-malloc-threshold+llc-sweep(inputs from half the L2), 1 thread(s)",
            "perf_counter+fresh-inputs+fixed-malloc-threshold+llc-sweep(inputs from half the L2), ",
        )
    )
    assert "interleaved in blocks" in t.method and t.method.endswith(f"median of {calls} after 2 warm-up")
    # The speedup is the median of per-round ratios, which sits near the ratio of the medians.
    assert 0.5 < t.speedup_vs_eager / (t.eager_us / t.candidate_us) < 2.0
    lo, hi = t.speedup_vs_eager_interval
    assert lo <= t.speedup_vs_eager <= hi
    assert result.check("timed_outputs").passed
    data = result.to_json()
    assert data["reward"] == result.reward and data["environment"]["torch"]


def test_baselines_are_timed_beside_the_kernel_in_every_profile(ws: Workspace, harness_cache: Path) -> None:
    # No timing is ever cached: a file that looks like cached baselines changes nothing, and two
    # profiles each time eager and torch.compile again (their numbers differ a little).
    planted = harness_cache / "baselines" / "planted.json"
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_text(json.dumps({"eager_us": 1e9, "compile_us": 1e9, "method": "forged"}))
    try:
        harness = Harness(ws, device="cpu", trials=10, warmup=1)
        first, second = harness.profile(), harness.profile()
        for result in (first, second):
            assert result.timings is not None and result.timings.eager_us < 1e8, result.summary()
        assert (first.timings.eager_us, first.timings.compile_us) != (
            second.timings.eager_us,
            second.timings.compile_us,
        )
        assert sorted(p.name for p in planted.parent.iterdir()) == ["planted.json"]
    finally:
        planted.unlink()  # the cache is shared by the whole run: later tests must not see it


def _zygote_children(harness: Harness) -> list[int]:
    assert harness.pool._proc is not None
    zygote = harness.pool._proc.pid
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == zygote:
                found.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_later_rounds_reuse_warm_baselines_and_survive_losing_them(ws: Workspace) -> None:
    # torch.compile is built and warmed once per reference: the next round loads only its own
    # weights and inputs into the kept process, and still times both baselines beside the kernel.
    harness = Harness(ws, device="cpu", trials=10, warmup=1)
    first, second = harness.profile(), harness.profile()
    assert first.correct and second.correct, second.summary()
    # Prewarmed from the reference's own inputs while the first round still built: even the
    # first round found them ready to reuse.
    assert first.timing_detail["baselines"]["reused"] is True
    assert second.timing_detail["baselines"]["reused"] is True
    assert second.timing_detail["baselines"]["rounds"] >= 2
    assert second.timings is not None and second.timings.compile_us > 0 and second.timings.eager_us > 0
    # The kept processes die (or are killed): the next round starts a fresh one. Between rounds
    # the worker's only children are its services (earlier tests may have left one for their own
    # reference).
    kept = _zygote_children(harness)
    assert 1 <= len(kept) <= 2
    subprocess.run(["kill", "-9", *map(str, kept)], check=True)
    third = harness.profile()
    assert third.correct and third.timings is not None, third.summary()
    assert third.timing_detail["baselines"]["rounds"] == (2 if any("timed again" in w for w in third.warnings) else 1)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def test_a_session_warms_its_baselines_before_its_first_round(ws: Workspace) -> None:
    # What optimize and chat do when a session opens: the worker starts and the baselines
    # process for this reference is warming before the model has written anything.
    harness = Harness(ws, device="cpu", trials=10, warmup=1)
    harness.start_ahead().join()
    before = set(_zygote_children(harness))
    subprocess.run(["kill", "-9", *map(str, before)], check=False)
    deadline = time.monotonic() + 30
    while any(_running(pid) for pid in before) and time.monotonic() < deadline:
        time.sleep(0.05)  # a killed torch process takes a moment to be gone
    harness.start_ahead().join()
    deadline = time.monotonic() + 20
    while not (started := {p for p in _zygote_children(harness) if _running(p)} - before):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)  # on a loaded machine the new process may take a moment to show
    assert len(started) == 1, "start_ahead did not start a baselines process"
    first = harness.profile()
    assert first.correct and first.timings is not None, first.summary()
    # Its first round (a second where a loaded machine had it timed again in longer blocks).
    again = any("timed again" in w for w in first.warnings)
    assert first.timing_detail["baselines"]["reused"] is True
    assert first.timing_detail["baselines"]["rounds"] == (2 if again else 1)
    assert started <= set(_zygote_children(harness))  # the one started ahead is the session's service


def test_wrong_kernel_gets_minus_one_naming_correctness(ws: Workspace) -> None:
    ws.candidate.write_text(WRONG)
    result = Harness(ws, device="cpu").verify()
    assert result.reward == -1 and not result.correct
    assert "correctness" in failed(result) and "max abs err 0.25" in failed(result)["correctness"]


def test_kernel_that_goes_wrong_after_a_few_calls_fails_timed_outputs(ws: Workspace) -> None:
    ws.candidate.write_text(
        candidate(
            "        self.calls += 1\n"
            "        if self.calls > 4:\n"
            "            return cuda_extension.add_scaled_wrong(a, b, self.scale)\n"
            "        return cuda_extension.add_scaled(a, b, self.scale)",
            "        self.calls = 0\n",
        )
    )
    result = Harness(ws, device="cpu", trials=10, warmup=2).profile()
    assert result.reward == -1 and "timed_outputs" in failed(result), result.summary()


def test_bursts_time_a_short_kernel_back_to_back_and_check_their_calls(ws: Workspace) -> None:
    result = Harness(ws, device="cpu", trials=10, warmup=2, bursts=3).profile()
    assert result.correct and result.reward is not None and result.reward >= 1, result.summary()
    detail = result.timing_detail or {}
    assert detail["burst_rounds"] == 3 and detail["burst_calls"] >= 4, detail
    assert detail["burst_outside_us"] is not None and detail["burst_null_us"] > 0
    found = detail["detection"]["bursts"]
    assert found["checked"] >= 3 and found["probability"] >= 0.99
    assert result.timings is not None and "bursts of" in result.timings.method


def test_a_kernel_wrong_only_when_called_back_to_back_fails_timed_outputs(ws: Workspace) -> None:
    # Right wherever the harness's work (fresh inputs, the sweep, evidence) separates its calls,
    # wrong in bursts, where a kernel that skipped its work would make its calls look short: the
    # bursts' calls are checked too.
    ws.candidate.write_text(candidate("        return cuda_extension.add_scaled_apart(a, b, self.scale)"))
    assert Harness(ws, device="cpu").verify().correct  # its calls apart: right
    result = Harness(ws, device="cpu", trials=10, warmup=2, bursts=3).profile()
    assert result.reward == -1 and "timed_outputs" in failed(result), result.summary()


def test_results_cached_by_shape_fail_timed_outputs(ws: Workspace) -> None:
    # Correct on every verified call (one model per seed); while timed, the one model sees the
    # input sets in an unpredictable rotation, so a cached answer is stale at checked calls.
    ws.candidate.write_text(
        candidate(
            "        key = (tuple(a.shape), tuple(b.shape))\n"
            "        if key not in self.cache:\n"
            "            self.cache[key] = cuda_extension.add_scaled(a, b, self.scale)\n"
            "        return self.cache[key]",
            "        self.cache = {}\n",
        )
    )
    result = Harness(ws, device="cpu", trials=12, warmup=2).profile()
    # Handing back the very tensor of an earlier call is caught first, on the repeated verification
    # call (output_reused); a cache that copied its answer would be stale at the checked timed calls.
    assert result.reward == -1, result.summary()
    assert "output_reused" in failed(result) or (
        result.check("correctness").passed and "timed_outputs" in failed(result)
    ), result.summary()


def test_python_only_candidate_fails_the_extension_kernel_check(ws: Workspace) -> None:
    ws.candidate.write_text(candidate("        return (a + b) * self.scale"))
    result = Harness(ws, device="cpu", policy="hybrid").verify()
    assert result.reward == -1 and "extension_kernel" in failed(result), result.summary()
    assert result.check("correctness").passed  # right numbers, but no kernel of its own ran


def test_crashing_kernel_kills_only_its_process(ws: Workspace) -> None:
    ws.candidate.write_text(candidate("        return cuda_extension.crash(a)"))
    harness = Harness(ws, device="cpu")
    result = harness.verify()
    assert result.reward == -1 and "SIGSEGV" in failed(result)["crash"]
    ws.candidate.write_text(CORRECT)
    assert harness.verify().correct  # the same harness and worker keep working


def test_hanging_kernel_is_killed_at_the_timeout(ws: Workspace) -> None:
    ws.candidate.write_text(candidate("        return cuda_extension.spin(a)"))
    result = Harness(ws, device="cpu", timeout=4).verify()
    assert result.reward == -1 and "time limit" in failed(result)["timeout"]


def test_compile_error_comes_back_trimmed_with_file_and_line(ws: Workspace) -> None:
    bad = ws.kernels_dir / "broken.cpp"
    bad.write_text('#include "../binding_registry.h"\nint f() {\n  return undeclared_name;\n}\n')
    try:
        result = Harness(ws, device="cpu").verify()
    finally:
        bad.unlink()
    assert result.reward == -1 and not result.compiled
    detail = failed(result)["compile"]
    assert detail.startswith("kernels/broken.cpp:3:10: error: 'undeclared_name' was not declared")
    assert "full log:" in detail and len(detail) < 1500
    assert result.compile_log and "undeclared_name" in Path(result.compile_log).read_text()


def test_editing_one_kernel_rebuilds_only_its_object(ws: Workspace) -> None:
    harness = Harness(ws, device="cpu")
    extra = ws.kernels_dir / "twice.cpp"
    body = (
        # a source of its own: an object the suite's build store keeps from an earlier run is linked
        f"// {uuid.uuid4()}\n"
        '#include <torch/csrc/utils/pybind.h>\n#include "../binding_registry.h"\n'
        "static int twice(int x) { return %s; }\n"
        'static void reg(pybind11::module& m) { m.def("twice", &twice); }\nREGISTER_BINDING(twice, reg);\n'
    )
    try:
        extra.write_text(body % "2 * x")
        harness.compile()
        assert harness.last_compile["rebuilt"] == ["obj/kernels/twice.o", "module/cuda_extension.so"]
        extra.write_text(body % "x + x")
        harness.compile()
        assert harness.last_compile["rebuilt"] == ["obj/kernels/twice.o", "module/cuda_extension.so"]
        harness.compile()
        assert harness.last_compile["rebuilt"] == []  # nothing changed: nothing rebuilt
    finally:
        extra.unlink()
    harness.compile()


def test_lock_violation_is_recorded_and_fails(ws: Workspace) -> None:
    model = ws.root / "model.py"
    original = model.read_text()
    model.chmod(0o644)
    model.write_text(original.replace("* self.scale", "* 0"))
    try:
        result = Harness(ws, device="cpu").verify()
    finally:
        model.write_text(original)
        model.chmod(0o444)
    assert result.reward == -1 and failed(result)["lock"] == "model.py was modified"


def test_planted_extension_in_the_workspace_is_never_imported(ws: Workspace) -> None:
    # A cuda_extension.py beside model_new.py would win the import if the workspace were on sys.path.
    planted = ws.root / "cuda_extension.py"
    planted.write_text("def add_scaled(a, b, s):\n    return (a + b) * s\n")
    try:
        result = Harness(ws, device="cpu").verify()
    finally:
        planted.unlink()
    assert result.correct and result.check("extension_kernel").passed, result.summary()


def test_cli_verify_json_prints_one_design_object(ws: Workspace, harness_cache: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "verify", str(ws.root), "--device", "cpu", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["correct"] is True and data["reward"] is None and data["device"] == "cpu"
    ws.candidate.write_text(WRONG)
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "verify", str(ws.root), "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1
    assert "FAIL correctness" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("NOT correct, reward -1")


def test_profile_times_every_baseline_and_draws_the_roofline(ws: Workspace) -> None:
    result = Harness(ws, device="cpu", trials=10, warmup=2, baselines=("compile", "autotune")).profile()
    assert result.correct and result.timings is not None, result.summary()
    t = result.timings
    # max-autotune is timed in the same window as eager and default torch.compile.
    assert set(t.baselines) == {"eager", "compile", "autotune"}, t.baselines
    assert t.best_baseline == min(t.baselines, key=lambda side: t.baselines[side]["us"])
    assert t.speedup_vs_best == pytest.approx(t.baselines[t.best_baseline]["speedup"], abs=1e-4)
    assert t.speedup_vs_best <= min(row["speedup"] for row in t.baselines.values()) + 1e-3
    # The speed-of-light time of a float32 add: its bytes over the measured bandwidth.
    line = t.roofline
    assert line is not None and line["dtype"] == "float32" and line["bound"] == "memory", line
    assert line["bytes"] > 0 and line["peak_source"] == "measured" and line["sol_us"] > 0
    assert set(line["fractions"]) == {"eager", "compile", "autotune", "candidate"}
    assert t.fraction_of_peak == line["fractions"]["candidate"] and 0 < t.fraction_of_peak < 5
    data = result.to_json()["timings"]
    for key in ("speedup_vs_best", "speedup_vs_best_interval", "best_baseline", "fraction_of_peak", "baselines"):
        assert key in data, key
    assert data["reward_baseline"] == "paper"
    assert "torch.compile max-autotune" not in " ".join(result.warnings)  # it was made and timed
    assert "vs best" in result.summary() and "speed-of-light" in result.summary()


def test_reward_baseline_best_decides_the_reward_on_the_fastest_baseline(ws: Workspace) -> None:
    from cuda_agent_cli.harness.reward import reward_for_intervals

    harness = Harness(ws, device="cpu", trials=10, warmup=2, baselines=("compile", "autotune"), reward_baseline="best")
    result = harness.profile()
    t = result.timings
    assert t is not None and t.reward_baseline == "best", result.summary()
    if not (result.timing_detail or {}).get("reward_held"):
        assert result.reward == reward_for_intervals(t.speedup_vs_eager_interval, t.speedup_vs_best_interval)
    with pytest.raises(Exception, match="reward baseline"):
        Harness(ws, device="cpu", reward_baseline="fastest")
    with pytest.raises(Exception, match="unknown baseline"):
        Harness(ws, device="cpu", baselines=("turbo",))


def test_a_kernel_the_clock_does_not_resolve_is_timed_again_in_longer_blocks_and_bursts(ws: Workspace) -> None:
    # On a loaded machine the harness's own work per call wanders more than the kernel takes:
    # the first window cannot check its claims. The profile is timed once more, in blocks four
    # times as long (and four times the calls) and then in bursts of back-to-back calls read on
    # the processes' CPU-time clocks, before its reward would be held.
    class Loaded(Harness):
        windows: list[dict] = []

        def _evaluate(self, timed: bool):  # type: ignore[no-untyped-def]
            result = super()._evaluate(timed)
            Loaded.windows.append(self._timing_plan(0))
            if len(Loaded.windows) == 1:
                result.timing_detail["below_resolution"] = True
            return result

    result = Loaded(ws, device="cpu", trials=10, warmup=1).profile()
    assert [w["block"] for w in Loaded.windows] == [5, 20] and Loaded.windows[1]["trials"] == 40
    assert result.correct and result.timings is not None and result.timings.trials == 40, result.summary()
    assert "interleaved in blocks of 20" in result.timings.method
    assert any("timed again in blocks of 20 calls and in bursts" in w for w in result.warnings)
    assert [w["bursts"] for w in Loaded.windows] == [0, 8]
    detail = result.timing_detail or {}
    assert detail["burst_rounds"] == 8 and not detail["below_resolution"], detail
