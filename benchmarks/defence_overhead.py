"""What the anti-reward-hacking defences add to a verify+profile round.

A round is `Harness.profile()` on a warm harness (built extension, cached baselines): static
checks, verify on 5 seeds, the judge, and the timed calls. The defences are timed one by one in
this process on the same task, inputs and built extension, exactly as the harness calls them:

  static          check_sources() on model_new.py and the kernel sources
  integrity       snapshot_integrity() + verify_integrity()
  precision       precision_flags() before and after, and their diff
  threads         thread_baseline() + native_threads()
  op guard        StrictOpGuard around each of the 6 verified forwards, minus the bare forwards
  output checks   compare_values() on 5 seeds on the device, minus the plain allclose any
                  harness needs
  input evidence  fingerprints and byte ranges of each call's inputs and outputs (candidate
                  side), the judge's own fingerprints, the inputs_unchanged and aliasing checks
  determinism     the second forward on seed 0 and handing its output over (candidate job), and
                  comparing it (judge job): read from the harness's own phase records of the
                  timed rounds, median (harness-owned)
  timed outputs   copying the checked timed calls' outputs off the device and saving them
                  (candidate job), the reference's forward on the same rescaled inputs and the
                  comparison (judge job): from the same phase records (harness-owned; the
                  timed calls themselves run anyway)
  float64 anchor  the reference in float64 on each of the 6 verified calls and the error rule
                  of the module's precision (tools/precision.py), minus the comparison without it
  module state    the parameters' and buffers' fingerprints before and after each of the 8
                  verification calls, in the candidate's process and in the judge's, and the
                  judge's comparison (tools/module_state.py)
  changed weights the 2 calls after the weights change (load, step): the changes on both sides,
                  the candidate's and the reference's forward, and their checks
  draw plan       finding each input leaf's draw on the reference (tools/draws.py), in the
                  inputs job
  library calls   reading the built library's undefined symbols and holding them against strict

    python benchmarks/defence_overhead.py --device cpu --rounds 5
    python benchmarks/defence_overhead.py --gpu

Goal: the defences add under 10% to a round on the CPU, under 15% on the GPU. Exit 1 when the
goal is not met.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness_tasks import make_task_workspace  # noqa: E402

GOALS = {"cpu": 0.10, "cuda": 0.15}
SEEDS = 5
HARNESS_OWNED = ("determinism", "timed outputs")
from cuda_agent_cli.harness.driver import TIMED_CHECKS as TIMED_CHECKED  # noqa: E402
from cuda_agent_cli.kernel_files import KernelFiles  # noqa: E402


def _best_time(fn: Callable[[], Any], repeat: int) -> float:
    # The fastest of several runs: the one least disturbed by other load on the machine. The
    # round is taken the same way, so the share compares like with like.
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def measure(device: str, rounds: int, repeat: int) -> dict[str, Any]:
    from cuda_agent_cli import resources
    from cuda_agent_cli.harness import Harness
    from cuda_agent_cli.harness.static import check_sources

    with tempfile.TemporaryDirectory(prefix="defence-overhead-") as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        ws = make_task_workspace("axpby", Path(tmp) / "session", device)
        harness = Harness(ws, device=device)
        first = harness.profile()  # builds, computes baselines
        if not first.correct:
            raise SystemExit(f"the task is not correct on {device}:\n{first.summary()}")
        round_times = []
        owned: dict[str, list[float]] = {"determinism": [], "timed outputs": []}
        for _ in range(rounds):
            start = time.perf_counter()
            result = harness.profile()
            round_times.append(time.perf_counter() - start)
            phases = result.phase_seconds
            owned["determinism"].append(phases.get("candidate.determinism", 0.0) + phases.get("judge.determinism", 0.0))
            owned["timed outputs"].append(
                phases.get("candidate.timed_saves", 0.0) + phases.get("judge.timed_outputs", 0.0)
            )
        round_s = min(round_times)
        module_dir = (harness.last_compile or {}).get("module_dir")
        harness.pool.close()

        # The same pieces, in this process, as the candidate and judge processes run them.
        import torch

        sys.path.insert(0, str(resources.tools_dir()))
        import evidence
        import integrity
        import op_guard
        import output_checks

        op_guard.warm_up()
        # As every process of an evaluation does first: which tensors carry a SHA-256 digest
        # (all on the CPU; on CUDA only those up to 8 MB, the rest their sums on the device).
        evidence.session_device(device)
        sys.path.insert(0, module_dir)
        import cuda_extension  # noqa: F401  (model_new.py imports it)

        ref_mod = _load(ws.reference, "defence_reference")
        new_mod = _load(ws.candidate, "defence_candidate")
        init = list(ref_mod.get_init_inputs()) if hasattr(ref_mod, "get_init_inputs") else []
        ref_model = ref_mod.Model(*init).to(device)
        cand_model = new_mod.ModelNew(*init).to(device)
        seeds_inputs = []
        for seed in range(SEEDS):
            torch.manual_seed(seed)
            seeds_inputs.append([t.to(device) if isinstance(t, torch.Tensor) else t for t in ref_mod.get_inputs()])

        def sync() -> None:
            if device == "cuda":
                torch.cuda.synchronize()

        with torch.no_grad():
            expected = [ref_model(*[t.clone() for t in inp]) for inp in seeds_inputs]
        sync()
        model_new_src = ws.candidate.read_text()
        cpp = KernelFiles.read(ws.root).sources()

        def forwards(guarded: bool) -> None:
            with torch.no_grad():
                for inp in seeds_inputs + seeds_inputs[:1]:
                    if guarded:
                        with op_guard.StrictOpGuard("strict"):
                            cand_model(*inp)
                    else:
                        cand_model(*inp)
            sync()

        outs = []
        with torch.no_grad():
            for inp in seeds_inputs:
                outs.append(cand_model(*inp))
        sync()

        # The judge compares on the device, as the harness does.
        def check_outputs() -> None:
            for e, o in zip(expected, outs):
                output_checks.compare_values(e, o, 1e-2, 1e-2)
            sync()

        def plain_allclose() -> None:
            for e, o in zip(expected, outs):
                torch.allclose(e, o, atol=1e-2, rtol=1e-2)
            sync()

        def input_evidence() -> None:
            # Candidate side: fingerprints and byte ranges after each call; judge side: the
            # fingerprints of its own copies and the two checks.
            for inp, o in zip(seeds_inputs, outs):
                proof = evidence.call_evidence(inp, o)
                before = evidence.fingerprint(list(inp))
                evidence.check_inputs_unchanged(before, proof["inputs_after"])
                evidence.check_aliasing(proof["output_ranges"], proof["input_ranges"])

        def check_integrity() -> None:
            integrity.verify_integrity(integrity.snapshot_integrity())

        def precision() -> None:
            integrity.diff_precision_flags(integrity.precision_flags(), integrity.precision_flags())

        def threads() -> None:
            integrity.thread_baseline()
            integrity.native_threads()

        import copy

        import draws
        import leaves
        import module_state

        ref64 = copy.deepcopy(ref_model).to(torch.float64)

        def wide(inp: list[Any]) -> list[Any]:
            return leaves.map_tensors(inp, lambda t: t.to(torch.float64) if t.is_floating_point() else t)

        def anchored_checks() -> None:
            with torch.no_grad():
                for inp, e, o in zip(seeds_inputs + seeds_inputs[:1], expected + expected[:1], outs + outs[:1]):
                    output_checks.compare_values(e, o, 1e-2, 1e-2, ref64(*wide(inp)), "dtype")
            sync()

        def unanchored_checks() -> None:
            for e, o in zip(expected + expected[:1], outs + outs[:1]):
                output_checks.compare_values(e, o, 1e-2, 1e-2)
            sync()

        def state() -> None:
            for _ in range(SEEDS + 3):
                for model in (cand_model, ref_model, cand_model, ref_model):
                    module_state.fingerprints(model)
                module_state.check(
                    module_state.fingerprints(ref_model),
                    module_state.tensors(ref_model),
                    {"after": module_state.fingerprints(cand_model), "changed": []},
                    [],
                    lambda r, c: [],
                )
            sync()

        original = {k: v.clone() for k, v in module_state.tensors(ref_model).items()}

        def changed_weights() -> None:
            with torch.no_grad():
                for model in (cand_model, ref_model):
                    module_state.load(model, original)
                    module_state.step(model, 7)
                for inp, e in zip(seeds_inputs[:2], expected[:2]):
                    o = cand_model(*inp)
                    r = ref_model(*inp)
                    output_checks.compare_values(r, o, 1e-2, 1e-2, ref64(*wide(inp)), "dtype")
                for model in (cand_model, ref_model):
                    module_state.load(model, original)
            sync()

        def draw_plan() -> None:
            with torch.no_grad():
                draws.find_plan(
                    lambda args: ref_model(*args), seeds_inputs[0], lambda x: leaves.map_tensors(x, torch.clone)
                )
            sync()

        from cuda_agent_cli.assets.tools import allowed_ops

        from cuda_agent_cli.harness import library_symbols

        libraries = sorted(Path(module_dir).glob("*.so"))

        def library_calls() -> None:
            library_symbols.library_check(libraries, device, "strict", allowed_ops.ALLOWED_ATEN)

        costs = {
            "static": _best_time(lambda: check_sources(model_new_src, cpp, "strict"), repeat),
            "integrity": _best_time(check_integrity, repeat),
            "precision": _best_time(precision, repeat),
            "threads": _best_time(threads, repeat),
            "op guard": max(
                0.0, _best_time(lambda: forwards(True), repeat) - _best_time(lambda: forwards(False), repeat)
            ),
            "output checks": max(0.0, _best_time(check_outputs, repeat) - _best_time(plain_allclose, repeat)),
            "input evidence": _best_time(input_evidence, repeat),
            "float64 anchor": max(0.0, _best_time(anchored_checks, repeat) - _best_time(unanchored_checks, repeat)),
            "module state": _best_time(state, repeat),
            "changed weights": _best_time(changed_weights, repeat),
            "draw plan": _best_time(draw_plan, repeat),
            "library calls": _best_time(library_calls, repeat),
            "determinism": statistics.median(owned["determinism"]),
            "timed outputs": statistics.median(owned["timed outputs"]),
        }
        env = result.environment
    return {
        "device": device,
        "round_s": round_s,
        "rounds": round_times,
        "costs": costs,
        "environment": env,
        "numel": int(seeds_inputs[0][0].numel()),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpu", action="store_true", help="run on cuda")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None)
    p.add_argument("--rounds", type=int, default=5, help="warm verify+profile rounds to time")
    p.add_argument("--repeat", type=int, default=7, help="repetitions per defence measurement")
    a = p.parse_args()
    device = "cuda" if a.gpu else (a.device or "cpu")
    r = measure(device, a.rounds, a.repeat)
    repeat = a.repeat
    env = r["environment"]
    total = sum(r["costs"].values())
    share = total / r["round_s"]
    print(
        f"defence overhead on {env.get('gpu') or 'cpu'} | torch {env.get('torch')} | device {device} | "
        f"task axpby ({r['numel']} elements per input)"
    )
    print(
        f"warm verify+profile round: best {r['round_s'] * 1000:.0f} ms of {len(r['rounds'])} "
        f"(median {statistics.median(r['rounds']) * 1000:.0f}, max {max(r['rounds']) * 1000:.0f}); "
        f"defences: best of {repeat} each"
    )
    print("rounds (ms): " + ", ".join(f"{t * 1000:.0f}" for t in r["rounds"]))
    print()
    print(f"{'defence':<16}{'ms per round':>14}{'share':>9}   ({TIMED_CHECKED} checked timed calls per round)")
    for name, cost in r["costs"].items():
        print(f"{name:<16}{cost * 1000:>14.2f}{cost / r['round_s']:>9.1%}")
    guards_part = sum(v for k, v in r["costs"].items() if k not in HARNESS_OWNED)
    harness_part = total - guards_part
    print(f"{'  guards+static':<16}{guards_part * 1000:>14.2f}{guards_part / r['round_s']:>9.1%}")
    print(f"{'  harness checks':<16}{harness_part * 1000:>14.2f}{harness_part / r['round_s']:>9.1%}")
    print(f"{'total':<16}{total * 1000:>14.2f}{share:>9.1%}")
    print()
    goal = GOALS[device]
    print(f"goal: under {goal:.0%} of a round: {'met' if share < goal else 'NOT met'}")
    return 0 if share < goal else 1


if __name__ == "__main__":
    sys.exit(main())
