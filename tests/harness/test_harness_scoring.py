"""Pure parts of the harness: reward, review flags, kernel names, reference checks, trimming."""

from __future__ import annotations

import dataclasses

from cuda_agent_cli.assets.tools.compiler_errors import trim_compiler_output

from cuda_agent_cli.harness.clock_stats import side_by_side
from cuda_agent_cli.harness.extension_check import (
    extension_kernel_check,
    kernel_names_in_sources,
    library_calls_in_sources,
    torch_kernels_check,
)
from cuda_agent_cli.harness.reference_check import reference_problems
from cuda_agent_cli.harness.review import review_warnings
from cuda_agent_cli.harness.reward import reward_for_intervals, uncertain
from cuda_agent_cli.harness_result import Check, HarnessResult, Timings


def test_review_flags_implausible_speedups_but_not_ordinary_ones() -> None:
    assert review_warnings(2.0, 1.5, 50.0, 10.0) == []
    assert any("beyond 10x" in w for w in review_warnings(12.0, 3.0, 50.0, None))
    assert any("roofline" in w for w in review_warnings(2.0, 2.0, 5.0, 20.0))


def test_reward_is_decided_on_the_intervals() -> None:
    assert reward_for_intervals((1.2, 1.4), (1.1, 1.3)) == 3
    assert reward_for_intervals((1.2, 1.4), (1.0, 1.3)) == 2  # the compile interval reaches below 1.05
    assert reward_for_intervals((1.04, 1.4), (1.2, 1.3)) == 1
    assert uncertain((1.04, 1.4), (1.2, 1.3)) and uncertain(None, (1.0, 1.1))
    assert not uncertain((1.2, 1.4), (0.5, 0.9))


def _block(round_: int, events: list[float], block_us: float) -> dict:
    n = len(events)
    return {"round": round_, "events_us": events, "walls_us": events, "block_us": block_us, "n": n}


def _window(
    cand_events: float, cand_block: float, rounds: int = 8, jitter: float = 0.0, overhead: float = 20.0
) -> dict:
    # Baselines: 100 µs (eager) and 80 µs (compile) calls, each block's wall `overhead` µs a call
    # above (the harness's work around a call in the baselines' process).
    out: dict[str, list[dict]] = {"eager": [], "compile": [], "candidate": []}
    for r in range(rounds):
        j = 1 + jitter * ((r % 3) - 1)
        out["eager"].append(_block(r, [100.0 * j] * 4, 4 * (100.0 * j + overhead)))
        out["compile"].append(_block(r, [80.0 * j] * 4, 4 * (80.0 * j + overhead)))
        out["candidate"].append(_block(r, [cand_events * j] * 4, 4 * cand_block * j))
    return out


def test_side_by_side_believes_an_honest_kernels_own_clock() -> None:
    stats = side_by_side(_window(50.0, 70.0))
    assert stats.candidate_us == 50.0 and stats.clamped_blocks == 0
    assert stats.speedup_vs_eager == 2.0 and stats.speedup_vs_compile == 1.6
    assert stats.eager_interval == (2.0, 2.0)


def test_side_by_side_bounds_a_lying_clock_by_the_harness_clock() -> None:
    # The candidate's process claims 1 µs calls, but its calls took 70 µs each from outside:
    # the bound ((70 - 20 µs of harness overhead - 5% of it unresolved) / 1.5) is what counts.
    stats = side_by_side(_window(1.0, 70.0))
    assert stats.clamped_blocks == 8
    assert abs(stats.candidate_us - 49.0 / 1.5) < 1e-9


def test_the_candidates_own_overhead_is_calibrated_by_its_null_blocks() -> None:
    # A small kernel (50 µs) in a process whose harness work costs 300 µs a call more than the
    # baselines' 2,000 µs (op guard, kept outputs; 1.13-1.18 times on the H200): bounded by the
    # baselines' overhead alone, the honest claim would be overruled; the null blocks of its own
    # process say what its overhead is.
    window = _window(50.0, 50.0 + 2300.0, overhead=2000.0)
    assert side_by_side(window).clamped_blocks == 8
    window["null"] = [_block(r, [2.0] * 4, 4 * (2.0 + 2300.0)) for r in range(8)]
    stats = side_by_side(window)
    assert stats.clamped_blocks == 0 and stats.candidate_us == 50.0
    assert not stats.detail["null_capped"]
    # The same process lying about its calls (1 µs) is still bounded by its own overhead.
    window = _window(1.0, 400.0 + 2300.0, overhead=2000.0)
    window["null"] = [_block(r, [2.0] * 4, 4 * 2302.0) for r in range(8)]
    lied = side_by_side(window)
    assert lied.clamped_blocks == 8 and lied.candidate_us > 180.0


def test_null_blocks_made_slow_on_purpose_do_not_loosen_the_bound() -> None:
    # The candidate's process stalls while its null blocks run (10 ms a call) so that its
    # overhead looks larger than its real calls and any claim stands: what the null blocks show
    # is believed only up to NULL_TRUST times the baselines' processes' overhead.
    window = _window(1.0, 50.0 + 100.0)
    window["null"] = [_block(r, [2.0] * 4, 4 * 10_000.0) for r in range(8)]
    stats = side_by_side(window)
    assert stats.detail["null_capped"] and stats.clamped_blocks == 8
    # (150 - the most believed overhead, 4 x 20 + 50 - its unresolved 5%) / 1.5, not the 1 µs claimed
    assert stats.candidate_us > 8.5


def test_on_the_cpu_clock_slow_null_blocks_are_held_to_the_baselines_overhead() -> None:
    # One thread a side: the CPU-time bound. The real calls cost 2,000 µs of the process's CPU
    # each, of which 1,000 µs is the harness's own work (as in the baselines' processes); the
    # null blocks burn 5,000 µs a call on purpose. Held to 1.5x the baselines' 1,000 µs, the
    # claim of 10 µs is overruled.
    window = {"eager": [], "compile": [], "candidate": [], "null": []}
    for r in range(6):
        window["eager"].append(_block(r, [3000.0] * 4, 4 * 4000.0))
        window["compile"].append(_block(r, [2000.0] * 4, 4 * 3000.0))
        window["candidate"].append({**_block(r, [10.0] * 4, 4 * 2100.0), "cpu_us": 4 * 2000.0})
        window["null"].append({**_block(r, [5.0] * 4, 4 * 5100.0), "cpu_us": 4 * 5000.0})
    stats = side_by_side(window)
    assert stats.detail["null_capped"] and stats.clamped_blocks == 6
    assert stats.candidate_us > 250.0 and stats.speedup_vs_eager < 12.0


def test_a_small_kernel_is_not_overruled_by_what_the_clock_cannot_resolve() -> None:
    # Measured on the H200 (axpby): 2.3 ms of harness work around each 54 µs call, and the real
    # calls cost about 110 µs more around them than the null ones of the same process (the
    # baselines' processes do the same work around their calls: fresh inputs, the flush). The
    # honest claim stands; a claim of 1 µs is still overruled.
    def window(claim: float) -> dict:
        w = _window(claim, 54.0 + 2306.0 + 110.0, overhead=2200.0)
        w["null"] = [_block(r, [1.3] * 4, 4 * (1.3 + 2306.0 + 48.0 * ((r % 3) - 1))) for r in range(8)]
        return w

    honest = side_by_side(window(54.0))
    assert honest.clamped_blocks == 0 and honest.candidate_us == 54.0
    lied = side_by_side(window(1.0))
    assert lied.clamped_blocks == 8 and lied.candidate_us > 10.0


def test_host_stalls_in_a_few_real_blocks_do_not_overrule_an_honest_claim() -> None:
    # Measured on the H200 (the CUDA demo, 34 µs calls, 1.7 ms of harness work around each):
    # the host stalls now and then for a few hundred µs, in null and real blocks alike, while
    # most null blocks agree within a few µs, so their wander reads small. Held block by block,
    # the stalled real blocks (and their bootstrap resamples) read the kernel at 200-300 µs.
    nulls = [1684.6, 1922.6, 1662.3, 1718.7, 1662.0, 2115.2, 1674.3, 1663.2]
    outside = [1700.0, 1709.8, 1712.0, 1715.0, 2313.2, 2168.9, 1767.3, 1712.2]

    def window(claim: float, seen: list[float]) -> dict:
        w = _window(claim, 0.0, overhead=1600.0)
        for r, b in enumerate(w["candidate"]):
            b["block_us"] = 4 * seen[r]
        w["null"] = [_block(r, [1.3] * 4, 4 * x) for r, x in enumerate(nulls)]
        return w

    honest = side_by_side(window(34.0, outside))
    assert honest.clamped_blocks == 0 and honest.candidate_us == 34.0
    assert honest.eager_interval[0] > 2.9
    # A kernel that claims 1 µs for 300 µs of work is held in every block: what it hides is in
    # all of them, stalls or not.
    hidden = side_by_side(window(1.0, [x + 300.0 for x in outside]))
    assert hidden.clamped_blocks == 8 and hidden.candidate_us > 150.0


def _cpu_window(claim: float, cand_cpu: float, preempted_ms: float) -> dict:
    """A CPU window as the dev machine measured it (one thread): about 10 ms of harness work
    around each call of the candidate's process (about as much as in the baselines' processes),
    and `preempted_ms` of every block lost to other programs (the wall clock sees it, the
    process's CPU-time clock does not)."""
    w = _window(claim, 0.0, overhead=9_500.0)
    for b in w["candidate"]:
        b["block_us"] = 4 * (cand_cpu + 10_000.0) + preempted_ms * 1000.0
        b["cpu_us"] = 4 * (cand_cpu + 10_000.0)
    w["null"] = [{**_block(r, [200.0] * 4, 4 * 10_200.0 + 300.0 * (r % 2)), "cpu_us": 4 * 10_200.0} for r in range(8)]
    return w


def _wall_only(window: dict) -> dict:
    return {side: [{k: v for k, v in b.items() if k != "cpu_us"} for b in blocks] for side, blocks in window.items()}


def test_on_the_cpu_a_preempted_block_does_not_overrule_an_honest_claim() -> None:
    # 800 µs calls, 6 ms of each block lost to a CPU hog: from the wall clock the bound
    # ((4 * 10.8 ms + 6 ms) / 4 - 10 ms overhead - 5%) / 1.5 is above the honest claim.
    window = _cpu_window(800.0, 800.0, preempted_ms=6.0)
    assert side_by_side(_wall_only(window)).clamped_blocks == 8
    stats = side_by_side(window)
    assert stats.clamped_blocks == 0 and stats.candidate_us == 800.0
    assert stats.detail["cpu_overhead_us"] == 10_000.0


def test_on_the_cpu_a_lying_claim_is_held_close_to_its_work() -> None:
    # The wall clock cannot resolve 5% of a 10 ms overhead: a claim of 10 µs for 800 µs of work
    # would be held to 174 µs only. The CPU clock, steady to 1%, holds it to 467 µs.
    assert side_by_side(_wall_only(_cpu_window(10.0, 800.0, preempted_ms=0.0))).candidate_us < 180.0
    lied = side_by_side(_cpu_window(10.0, 800.0, preempted_ms=0.0))
    assert lied.clamped_blocks == 8 and lied.candidate_us > 450.0


def _drifting_cpu_window(claim: float, work: float) -> dict:
    """A CPU window as a shared 2-core virtual machine measured the demo kernel: about 7 ms of
    harness work around each call on every side, moving by up to 1.9 ms over the window (a
    neighbour's memory traffic slows the sweep and the copies of every process alike; these are
    the null blocks of one such window), 20 rounds. `work` is what each of the candidate's calls
    really costs on its CPU-time clock."""
    drift = [1557, 1895, 1708, 291, 635, 283, 364, 1337, 654, 571, 489, 0, 438, 1118, 803, 431, 424, 794, 809, 652]
    w = _window(claim, 0.0, rounds=20, overhead=7_000.0)
    for r, b in enumerate(w["candidate"]):
        b["cpu_us"] = 4 * (work + 7_000.0 + drift[r])
        b["block_us"] = b["cpu_us"] + 200.0
    w["null"] = [
        {**_block(r, [150.0] * 4, 4 * (7_150.0 + drift[r]) + 200.0), "cpu_us": 4 * (7_150.0 + drift[r])}
        for r in range(20)
    ]
    w["base_null"] = [
        {**_block(r, [150.0] * 4, 4 * (7_100.0 + drift[r]) + 200.0), "cpu_us": 4 * (7_100.0 + drift[r])}
        for r in range(20)
    ]
    return w


def test_on_the_cpu_a_drifting_machine_neither_hides_an_honest_kernel_nor_frees_a_lie() -> None:
    # Against the window's typical overhead the harness's work moves by four times the kernel:
    # one block's bound cannot resolve a 450 us kernel. Held against the null block of its own
    # round, and over the window's twenty blocks, it is resolved and believed.
    honest = side_by_side(_drifting_cpu_window(450.0, 450.0))
    assert honest.clamped_blocks == 0 and honest.candidate_us == 450.0
    assert not honest.detail["below_resolution"]
    assert honest.detail["window_resolution_us"] < 300.0 < honest.detail["resolution_us"]
    # A claim of 50 us for the same 450 us of work is held by the window's bound.
    lied = side_by_side(_drifting_cpu_window(50.0, 450.0))
    assert lied.clamped_blocks == 20 and lied.candidate_us > 60.0


def test_side_by_side_times_work_that_escapes_the_calls_stream() -> None:
    # Events on the call's stream read 5 µs, but the device stayed busy 60 µs: another stream.
    window = _window(5.0, 70.0)
    for b in window["candidate"]:
        b["walls_us"] = [60.0] * b["n"]
    assert side_by_side(window).candidate_us == 60.0


def _ahead_window(claim: float, cand_walls: float, null_walls: float) -> dict:
    # Measured on the H200: what runs ahead of a call (the lead-in, the flush) kept the device
    # busy 490 us past a trusted call's events, but only 410 us past a null call's in the
    # candidate's process, whose op guard and evidence take longer on the host before the clock
    # starts.
    window = _window(claim, 300.0)
    for side in ("eager", "compile"):
        for b in window[side]:
            b["walls_us"] = [e + 490.0 for e in b["events_us"]]
    window["null"] = [_block(r, [1.0] * 4, 4 * 280.0) for r in range(8)]
    for b in window["null"]:
        b["walls_us"] = [null_walls] * 4
    for b in window["candidate"]:
        b["walls_us"] = [cand_walls] * b["n"]
    return window


def test_work_on_an_unjoined_stream_is_timed_from_what_runs_ahead_in_the_candidates_own_process() -> None:
    # A kernel on a stream it never joins claims 5 us and keeps the device 291 us busier.
    assert abs(side_by_side(_ahead_window(5.0, 410.0 + 291.0, 411.0)).candidate_us - 291.0) < 1.0
    # Null calls made to look slow (a gap of 900 us) take no more off than the trusted gap.
    assert side_by_side(_ahead_window(5.0, 410.0 + 291.0, 901.0)).candidate_us >= 291.0 - 80.0 - 1.0
    # An honest kernel in that process is still believed: its events, not its walls.
    assert side_by_side(_ahead_window(291.0, 410.0 + 291.0, 411.0)).candidate_us == 291.0


def _candidate_noise(window: dict, amount: float) -> dict:
    # The candidate's blocks alone vary from round to round: noise a round's baselines do not share.
    for r, b in enumerate(window["candidate"]):
        j = 1 + amount * ((r * 7 % 5) - 2) / 2
        b["events_us"] = [e * j for e in b["events_us"]]
        b["walls_us"] = list(b["events_us"])
        b["block_us"] *= j
    return window


def test_side_by_side_intervals_widen_with_noise_and_are_reproducible() -> None:
    noisy = side_by_side(_candidate_noise(_window(50.0, 70.0, rounds=12), 0.3), seed=1)
    lo, hi = noisy.eager_interval
    assert lo < noisy.speedup_vs_eager < hi and hi - lo > 0.3
    assert noisy == side_by_side(_candidate_noise(_window(50.0, 70.0, rounds=12), 0.3), seed=1)


def test_a_slowdown_that_hits_every_side_of_a_round_leaves_the_ratio_alone() -> None:
    # The machine gets up to 30% slower or faster from round to round (a neighbour on the host),
    # which each round's blocks share, while the candidate's own calls vary by 2%: each round's
    # ratio, and so the interval, stays within those 2%.
    window = _window(50.0, 70.0, rounds=14)
    for r in range(14):
        load = 1 + 0.3 * ((r * 5 % 7) - 3) / 3
        own = 1 + 0.02 * ((r * 3 % 5) - 2) / 2
        for side, b in ((s, window[s][r]) for s in ("eager", "compile", "candidate")):
            j = load * (own if side == "candidate" else 1.0)
            b["events_us"] = [e * j for e in b["events_us"]]
            b["walls_us"] = list(b["events_us"])
            b["block_us"] *= j
    loaded = side_by_side(window, seed=1)
    assert 1.96 <= loaded.eager_interval[0] <= loaded.speedup_vs_eager <= loaded.eager_interval[1] <= 2.04
    assert 1.56 <= loaded.compile_interval[0] <= loaded.compile_interval[1] <= 1.64


def test_kernel_names_are_read_from_global_functions() -> None:
    src = """
    template <typename T> __global__ void __launch_bounds__(256) axpby_kernel(const T* x, T* y) {}
    __global__ void relu_kernel(float* x) {}
    __device__ float helper(float x) { return x; }
    static __global__ void gemm_epilogue(float* c) {}
    """
    assert kernel_names_in_sources([src]) == {"axpby_kernel", "relu_kernel", "gemm_epilogue"}


def test_extension_kernel_check_on_cuda_needs_a_kernel_from_the_sources() -> None:
    seen = ["void relu_kernel(float*)", "at::native::vectorized_elementwise_kernel<4>"]
    assert extension_kernel_check("cuda", 0, seen, {"relu_kernel"}).passed
    ghost = extension_kernel_check("cuda", 0, ["at::native::vectorized_elementwise_kernel<4>"], {"relu_kernel"})
    assert not ghost.passed and "relu_kernel" in ghost.detail
    assert not extension_kernel_check("cuda", 3, None, {"relu_kernel"}, "CUPTI missing").passed


def test_torch_compute_kernels_beside_the_extensions_fail_strict_on_cuda() -> None:
    # ATen's relu run from C++ with the op guard's dispatch key switched off: the profiler still
    # names torch's kernel, beside the candidate's own.
    relu = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
        "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)"
        "::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>"
    )
    seen = ["(anonymous namespace)::row_index_kernel(long*, long, long)", relu]
    check = torch_kernels_check("cuda", "strict", seen)
    assert check is not None and not check.passed and "clamp_scalar" in check.detail
    # copies, fills and indexing move memory: what strict allows beside a kernel
    moves = [
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >",
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::"
        "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const>",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 64, 64>",
        "Memcpy DtoD (Device -> Device)",
        "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32",
    ]
    honest = torch_kernels_check("cuda", "strict", ["void relu_kernel(float*)", *moves])
    assert honest is not None and honest.passed
    copysign = "void at::native::vectorized_elementwise_kernel<4, at::native::copysign_kernel_cuda(...)>"
    assert not torch_kernels_check("cuda", "strict", [copysign]).passed  # type: ignore[union-attr]
    # nothing to say under hybrid, on the CPU, or without a profile
    assert torch_kernels_check("cuda", "hybrid", seen) is None
    assert torch_kernels_check("cpu", "strict", seen) is None
    assert torch_kernels_check("cuda", "strict", None) is None


def test_a_pure_cublas_gemm_counts_as_the_extensions_kernel_on_cuda() -> None:
    gemm = ["sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "void at::native::elementwise_kernel"]
    source = "cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n);"
    assert extension_kernel_check("cuda", 2, gemm, set(), library_calls=library_calls_in_sources([source])).passed
    lt = "cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, c, lc, c, lc, nullptr, ws, size, stream);"
    assert library_calls_in_sources([lt]) and library_calls_in_sources(["at::cuda::blas::gemm<float>(...)"])
    # the library's kernel must have run from an entered extension function, and a library call
    # must be in the sources: an aten GEMM beside a kernel that never ran is still a ghost
    assert not extension_kernel_check("cuda", 0, gemm, set(), library_calls=True).passed
    assert not extension_kernel_check("cuda", 2, gemm, {"my_kernel"}, library_calls=False).passed
    assert not extension_kernel_check(
        "cuda", 2, ["void at::native::elementwise_kernel"], set(), library_calls=True
    ).passed


def test_extension_kernel_check_on_cpu_needs_the_extension_to_do_the_work() -> None:
    assert extension_kernel_check("cpu", 2, None, set(), ext_shares=[0.9, 0.35, 0.1]).passed
    assert not extension_kernel_check("cpu", 0, None, set()).passed
    # Entered, but almost all of forward's time is spent elsewhere: a no-op call.
    noop = extension_kernel_check("cpu", 5, None, set(), ext_shares=[0.001, 0.002, 0.9], policy="hybrid")
    assert not noop.passed and "do the work" in noop.detail
    assert extension_kernel_check("cpu", 5, None, set(), ext_shares=[0.1, 0.1], policy="hybrid").passed
    # Under strict the op guard keeps torch from doing the work, so entering the kernel is enough.
    assert extension_kernel_check("cpu", 5, None, set(), ext_shares=[0.01], policy="strict").passed


def test_reference_problems_name_what_is_missing() -> None:
    good = "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\n"
    assert reference_problems(good) == []
    assert reference_problems("def get_inputs(): return []\n") == ["model.py defines no class Model"]
    assert reference_problems("class Model: pass\n") == ["model.py defines no get_inputs()"]
    assert "line 1" in reference_problems("class (:\n")[0]


GCC_LOG = """[1/3] CXX obj/kernels/bad.o
FAILED: obj/kernels/bad.o
c++ -MMD -MF obj/kernels/bad.o.d -O3 -c /tmp/b/src/kernels/bad.cpp -o obj/kernels/bad.o
In file included from /tmp/b/src/kernels/bad.cpp:1:
/tmp/b/src/kernels/bad.cpp: In function 'at::Tensor f(const at::Tensor&)':
/tmp/b/src/kernels/bad.cpp:7:10: error: 'undefined_thing' was not declared in this scope
    7 |   return undefined_thing(x);
      |          ^~~~~~~~~~~~~~~
/tmp/b/src/kernels/bad.cpp:9:1: error: expected ';' before '}' token
/tmp/b/src/kernels/bad.cpp:9:3: warning: unused variable 'y'
ninja: build stopped: subcommand failed.
"""

NVCC_LOG = """/tmp/b/src/kernels/axpby.cu(12): error: identifier "blockIdxx" is undefined
      int i = blockIdxx.x * blockDim.x + threadIdx.x;
              ^

1 error detected in the compilation of "/tmp/b/src/kernels/axpby.cu".
"""


def test_trimmed_gcc_errors_keep_file_line_and_source_context() -> None:
    out = trim_compiler_output(GCC_LOG, ("/tmp/b/src",), log_path="/tmp/b/compile.log")
    lines = out.splitlines()
    assert lines[0] == "kernels/bad.cpp:7:10: error: 'undefined_thing' was not declared in this scope"
    assert "return undefined_thing(x);" in lines[1] and "^~~" in lines[2]
    assert "kernels/bad.cpp:9:1: error: expected ';'" in out
    assert "/tmp/b/src" not in out and "warning" not in out and "c++ -MMD" not in out
    assert out.endswith("(full log: /tmp/b/compile.log)")


def test_trimmed_nvcc_errors_and_the_error_cap() -> None:
    out = trim_compiler_output(NVCC_LOG, ("/tmp/b/src",))
    assert out.startswith('kernels/axpby.cu(12): error: identifier "blockIdxx" is undefined')
    many = "\n".join(f"/x/k.cpp:{i}:1: error: e{i}" for i in range(1, 12))
    capped = trim_compiler_output(many, max_errors=5)
    assert "e5" in capped and "e6" not in capped and "and 6 more error(s)" in capped


def test_trimming_keeps_the_tail_when_nothing_looks_like_an_error() -> None:
    out = trim_compiler_output("line a\nc++: internal compiler error? no\nSegmentation fault (core dumped)\n")
    assert "Segmentation fault" in out


def test_result_json_has_exactly_the_design_keys() -> None:
    r = HarnessResult(
        compiled=True,
        correct=True,
        reward=2,
        device="cpu",
        policy="strict",
        checks=[Check("correctness", True, "ok")],
        timings=Timings(10.0, 9.0, 5.0, 2.0, 1.8, "perf_counter, median of 20", 20),
        environment={"gpu": None, "torch": "2.13.0", "cuda": None, "extra": 1},
    )
    j = r.to_json()
    assert list(j) == [
        "compiled",
        "correct",
        "reward",
        "device",
        "policy",
        "errors",
        "warnings",
        "checks",
        "timings",
        "environment",
        "precision",
        "not_measured",
    ]
    assert set(j["timings"]) == {
        "eager_us",
        "compile_us",
        "candidate_us",
        "speedup_vs_eager",
        "speedup_vs_compile",
        "method",
        "trials",
        "speedup_vs_eager_interval",
        "speedup_vs_compile_interval",
        "uncertain",
        "reward_baseline",
    }
    assert HarnessResult.from_json(j).to_json() == j
    assert j["environment"] == {"gpu": None, "torch": "2.13.0", "cuda": None}
    assert "reward 2" in r.summary() and "2.00x" in r.summary()
    # Where every baseline and the roofline were measured, their keys join (docs/architecture.md).
    full = dataclasses.replace(
        r,
        timings=dataclasses.replace(
            r.timings,
            baselines={"eager": {"us": 10.0, "speedup": 2.0, "interval": [1.9, 2.1]}},
            best_baseline="eager",
            speedup_vs_best=2.0,
            speedup_vs_best_interval=(1.9, 2.1),
            roofline={"sol_us": 1.0, "fractions": {"candidate": 0.2}},
            fraction_of_peak=0.2,
        ),
    ).to_json()
    assert set(full["timings"]) - set(j["timings"]) == {
        "baselines",
        "best_baseline",
        "speedup_vs_best",
        "speedup_vs_best_interval",
        "roofline",
        "fraction_of_peak",
    }
    assert HarnessResult.from_json(full).to_json() == full


def test_a_result_as_recorded_is_the_one_its_json_object_reads_back() -> None:
    """What the host tools hand on: the same JSON object, and the same numbers a resumed session
    reads from the transcript (rounded, an interval not measured as its point, no local fields)."""
    live = HarnessResult(
        compiled=True,
        correct=True,
        reward=3,
        device="cpu",
        policy="strict",
        timings=Timings(10.123456, 9.87654, 4.999999, 2.024691, 1.975309, "perf_counter", 20, (1.98766, 2.06543)),
        compile_log="/tmp/build.log",
        stage_seconds={"compile": 1.5},
        timing_detail={"candidate": {"events_us": 5.0}},
    )
    recorded = live.as_recorded()
    assert recorded.to_json() == live.to_json()
    assert recorded == HarnessResult.from_json(live.to_json())
    assert recorded.timings is not None and recorded.timings.speedup_vs_eager == 2.0247
    assert recorded.timings.speedup_vs_eager_interval == (1.9877, 2.0654)
    assert recorded.timings.speedup_vs_compile_interval == (1.9753, 1.9753)
    assert recorded.compile_log is None and recorded.stage_seconds == {} and recorded.timing_detail == {}


def test_null_blocks_of_the_baselines_process_set_what_the_candidates_are_believed_up_to() -> None:
    # On the CPU-time bound (one thread a side): the same null blocks made in the baselines'
    # process (2,300 µs a call around a stand-in). The candidate's process showing 3,500 µs
    # around its own null calls is believed only up to 1.05 times that, so a 1 µs claim for
    # 1,000 µs of work is held to a third of its work (what a clock around 2.3 ms of harness
    # work per call can resolve), and an honest process showing 2,350 µs is believed as it is.
    def window(cand_null: float, claim: float, base_null: bool = True) -> dict:
        w = _window(claim, 1000.0 + 2350.0, overhead=2000.0)
        for b in w["candidate"]:
            b["cpu_us"] = b["block_us"]
        w["null"] = [{**_block(r, [2.0] * 4, 4 * (2.0 + cand_null)), "cpu_us": 4 * (2.0 + cand_null)} for r in range(8)]
        if base_null:
            w["base_null"] = [_block(r, [2.0] * 4, 4 * (2.0 + 2300.0 + 10.0 * (r % 3))) for r in range(8)]
        return w

    honest = side_by_side(window(2350.0, 1000.0))
    assert honest.clamped_blocks == 0 and honest.candidate_us == 1000.0 and not honest.detail["null_capped"]
    lied = side_by_side(window(3500.0, 1.0))
    assert lied.detail["null_capped"] and lied.clamped_blocks == 8 and lied.candidate_us > 300.0
    # Without the baselines' null blocks the looser NULL_TRUST applies, and the lie stands.
    assert side_by_side(window(3500.0, 1.0, base_null=False)).candidate_us < 300.0


def test_the_baselines_null_blocks_on_their_own_cpu_clock_are_the_trusted_measure() -> None:
    # Their wall clock includes the round trip to the controller (here 300 µs a call more than
    # their CPU time): the candidate's CPU-time overhead is held to their CPU time, the same
    # clock, so a process stalling its null blocks gains no more than NULL_TRUST_SAME's share.
    def window(cand_null: float, claim: float) -> dict:
        w = _window(claim, 1000.0 + 2350.0, overhead=2000.0)
        for b in w["candidate"]:
            b["cpu_us"] = b["block_us"] - 300.0 * 4
        w["null"] = [
            {**_block(r, [2.0] * 4, 4 * (302.0 + cand_null)), "cpu_us": 4 * (2.0 + cand_null)} for r in range(8)
        ]
        w["base_null"] = [
            {
                **_block(r, [2.0] * 4, 4 * (302.0 + 1800.0 + 10.0 * (r % 3))),
                "cpu_us": 4 * (2.0 + 1800.0 + 10.0 * (r % 3)),
            }
            for r in range(8)
        ]
        return w

    honest = side_by_side(window(1950.0, 1000.0))
    assert honest.clamped_blocks == 0 and honest.candidate_us == 1000.0 and not honest.detail["null_capped"]
    assert honest.detail["trusted_cpu_overhead_us"] == 1810.0
    lied = side_by_side(window(5000.0, 1.0))
    assert lied.detail["null_capped"] and lied.clamped_blocks == 8
    # (3,050 µs of CPU a call - the most believed, 1.2 x 1,810 + 50 - its unresolved 1%) / 1.5
    most = 1.2 * 1810.0 + 50.0
    assert abs(lied.candidate_us - (3050.0 - most - 0.01 * most) / 1.5) < 0.5


def _swept_window(cand_around: float, cand_null_around: float, base_null_around: float = 3400.0) -> dict:
    """A CPU window (one thread a side) shaped like the dev machine's profile of the CPU demo: a
    400 µs kernel, 3.4 ms of harness work around each call (the cache sweep is most of it), and
    the candidate's process spending `cand_around` around its timed calls and `cand_null_around`
    around its null calls, the baselines' process `base_null_around` around its own."""
    w = _window(400.0, 400.0 + cand_around + 40.0, overhead=base_null_around + 40.0)
    for r, b in enumerate(w["candidate"]):
        b["cpu_us"] = 4 * (400.0 + cand_around + 30.0 * ((r % 3) - 1))
    w["null"] = [
        {
            **_block(r, [90.0] * 4, 4 * (90.0 + cand_null_around + 40.0)),
            "cpu_us": 4 * (90.0 + cand_null_around + 30.0 * ((r % 3) - 1)),
        }
        for r in range(8)
    ]
    w["base_null"] = [
        {
            **_block(r, [90.0] * 4, 4 * (90.0 + base_null_around + 40.0)),
            "cpu_us": 4 * (90.0 + base_null_around + 20.0 * ((r % 3) - 1)),
        }
        for r in range(8)
    ]
    return w


def test_harness_work_skipped_in_the_candidates_process_is_seen_from_outside() -> None:
    # Measured on the dev CPU: an honest process spends 0.99-1.57 times as much around its timed
    # calls as around its null ones, and 0.85-1.23 times what the baselines' process spends.
    for around, null in ((3400.0, 3400.0), (3350.0, 3400.0), (5300.0, 3400.0), (3400.0, 2900.0), (4100.0, 4200.0)):
        assert side_by_side(_swept_window(around, null)).detail["skipped_work"] == []
    # The sweep before 3 of each 5 timed calls skipped (the fewest that move a block's median;
    # put back before the block ends, so the state the process keeps looks intact).
    skipped = side_by_side(_swept_window(3400.0 - 3 / 5 * 3000.0, 3400.0)).detail["skipped_work"]
    assert len(skipped) == 1 and "around each timed call" in skipped[0]
    # Skipped before every call, null ones included: its null calls cost far less than the same
    # calls in the baselines' process.
    skipped = side_by_side(_swept_window(400.0, 400.0)).detail["skipped_work"]
    assert len(skipped) == 1 and "ran none of its code" in skipped[0]
    # A process that stalls its null blocks on purpose is not taken for one that skipped work.
    assert side_by_side(_swept_window(3400.0, 9000.0)).detail["skipped_work"] == []


def test_enough_timed_calls_are_checked_to_catch_one_wrong_call_in_five() -> None:
    import math
    import sys

    from cuda_agent_cli.resources import tools_dir

    sys.path.insert(0, str(tools_dir()))  # the locked job modules import each other by name
    from controller import checks_needed

    for n in (10, 40, 100, 300):
        m, miss = checks_needed(n, 5, 0.99)
        bad = math.ceil(n / 5)
        assert miss <= 0.01 and math.isclose(miss, math.comb(n - bad, m) / math.comb(n, m))
        if m > 1:  # one check fewer would not do
            assert math.comb(n - bad, m - 1) / math.comb(n, m - 1) > 0.01
    assert checks_needed(100, 5, 0.99)[0] == 19


def _cpu_rounds(null_cpu: list[float], base_null_cpu: list[float], claim: float, real_cpu: float) -> dict:
    """One thread a side (the CPU-time clock): baselines of 3,000 and 2,000 µs calls, the
    candidate's calls costing its process `real_cpu` µs of CPU each, and each round's null
    blocks of both processes at the CPU time per call given."""
    window: dict[str, list[dict]] = {"eager": [], "compile": [], "candidate": [], "null": [], "base_null": []}
    for r, (own, base) in enumerate(zip(null_cpu, base_null_cpu)):
        window["eager"].append(_block(r, [3000.0] * 4, 4 * (3000.0 + base)))
        window["compile"].append(_block(r, [2000.0] * 4, 4 * (2000.0 + base)))
        window["candidate"].append({**_block(r, [claim] * 4, 4 * (real_cpu + 100.0)), "cpu_us": 4 * real_cpu})
        window["null"].append({**_block(r, [5.0] * 4, 4 * (own + 100.0)), "cpu_us": 4 * (own + 5.0)})
        window["base_null"].append({**_block(r, [5.0] * 4, 4 * (base + 100.0)), "cpu_us": 4 * (base + 5.0)})
    return window


def test_an_honest_process_whose_null_blocks_wander_is_capped_quietly_not_held() -> None:
    # Measured on the dev CPU (h_fraction_positive, about 4,800 µs of harness work a call): the
    # candidate's null blocks wandered 1,355 µs from round to round where the baselines' wandered
    # 373 µs, with the same typical overhead. That is noise, not a stall: the cap bounds it and
    # the result is not held at 1.
    own = [4750.0, 5350.0, 4700.0, 5300.0, 4750.0, 5350.0, 4700.0, 5300.0]
    base = [4800.0, 4900.0, 4750.0, 4880.0, 4790.0, 4900.0, 4770.0, 4870.0]
    stats = side_by_side(_cpu_rounds(own, base, claim=600.0, real_cpu=4900.0 + 600.0))
    assert stats.detail["null_capped"] and not stats.detail["null_stalled"]
    assert stats.clamped_blocks == 0 and stats.candidate_us == 600.0


def test_a_stall_in_a_few_null_blocks_buys_no_more_than_noise_at_the_cap() -> None:
    # The process stalls in three null blocks of eight (20 ms a call), too few to move their
    # median: it shows only as wander, which is believed up to what the baselines' process
    # allows, exactly as much as a process that wanders by 400 µs from round to round. Its claim
    # of 1 µs for 600 µs of work is still overruled in every block, and a result whose claims
    # are overruled in most blocks is held at a reward of 1 (the driver's timing_bound).
    base = [4800.0] * 8
    stalled = side_by_side(_cpu_rounds([4800.0, 25_000.0] * 3 + [4800.0] * 2, base, claim=1.0, real_cpu=5400.0))
    wandering = side_by_side(_cpu_rounds([4800.0, 5200.0] * 4, base, claim=1.0, real_cpu=5400.0))
    assert stalled.detail["null_capped"] and not stalled.detail["null_stalled"]
    assert stalled.detail["cpu_wander_us"] == wandering.detail["cpu_wander_us"]
    assert stalled.clamped_blocks == 8 and stalled.candidate_us > 50.0
    # In most rounds it moves the typical overhead itself: flagged, and held at 1 for that.
    flagged = side_by_side(_cpu_rounds([25_000.0] * 5 + [4800.0] * 3, base, claim=1.0, real_cpu=5400.0))
    assert flagged.detail["null_stalled"]
