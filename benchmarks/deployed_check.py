"""The applied demo in the user's own process: torch.compile (default, fullgraph=True,
max-autotune without CUDA graphs) must make one graph, with no graph break, that calls the
kernel's op and matches the original; with --time, the compiled patched module is timed against
the compiled original, and the eager patched module per call as a Python loop makes it.

python benchmarks/deployed_check.py DEMO_REPO [--time] [--json]
(DEMO_REPO: a folder where `cuda-agent demo --yes` applied its kernel; tests/gpu and the
integration tests run the check part, docs/benchmarks.md records the timed part.)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time


def _per_call_us(fn, x, device: str, n: int) -> float:
    import torch

    for _ in range(5):
        fn(x)
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn(x)
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repo")
    parser.add_argument("--time", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.repo))
    import torch
    from vit_head import PooledLayerNorm

    patched = PooledLayerNorm.forward
    original = patched.__wrapped__
    op = patched._cuda_agent_op.replace("::", ".")
    general_names = {op, op + "_nograd"}
    verified = json.load(open(os.path.join(args.repo, "_cuda_agent", "pooled_layer_norm", "verified.json")))
    family = verified["families"][0]
    device = verified["device"]
    dim = family["init"][0]["spec"]["value"]
    shape = family["args"][0]["spec"]["tensor"]["shape"]
    torch.manual_seed(0)
    m = PooledLayerNorm(dim).to(device).eval()
    torch.nn.init.normal_(m.norm.weight)
    torch.nn.init.normal_(m.norm.bias)
    x = torch.randn(*shape, device=device)
    report: dict = {"device": device, "shape": shape, "modes": {}}
    with torch.no_grad():
        expected = original(m, x)
        for name, kw in (
            ("default", {}),
            ("fullgraph", {"fullgraph": True}),
            ("max-autotune", {"mode": "max-autotune-no-cudagraphs"}),
        ):
            torch._dynamo.reset()
            explained = torch._dynamo.explain(m)(x)
            targets = [str(n.target) for g in explained.graphs for n in g.graph.nodes if n.op == "call_function"]
            graph_ops = patched._cuda_agent_graph_ops()
            torch._dynamo.reset()
            compiled = torch.compile(m, **kw)
            got = compiled(x)
            row = {
                "graphs": explained.graph_count,
                "graph_breaks": explained.graph_break_count,
                "calls_op": any(t.rsplit(".", 1)[0] in graph_ops or t in graph_ops for t in targets),
                # the extension's function itself as the operator (no Python of the loader per
                # call), and registered from the extension's C++ (no Python at all)
                "direct": any(t.rsplit(".", 1)[0] in graph_ops - general_names for t in targets),
                "direct_cpp": any(
                    not t.startswith("cuda_agent.") and t.rsplit(".", 1)[0] in graph_ops for t in targets
                ),
                "matches": bool(torch.allclose(got, expected, atol=1e-3, rtol=1e-3)),
            }
            if args.time:
                # The original code compiled beside it, on a twin of the module whose class keeps
                # the original forward: neither compiled function ever sees the other's class
                # change under it (a swapped class attribute fails dynamo's guards on every
                # call, and past the recompile limit it runs the frame uncompiled).
                twin = copy.deepcopy(m)
                twin.__class__ = type("OriginalPooledLayerNorm", (PooledLayerNorm,), {"forward": original})
                plain = torch.compile(twin, **kw)
                plain(x)
                compiled(x)
                # The loader's general operator (inputs and parameters as lists, the verified
                # module called from Python inside it), as a class without a direct route runs.
                general_op = getattr(getattr(torch.ops, op.split(".")[0]), op.split(".")[1] + "_nograd").default
                general = copy.deepcopy(m)
                general.__class__ = type(
                    "GeneralPooledLayerNorm",
                    (PooledLayerNorm,),
                    {"forward": lambda self, x: general_op([x], [self.norm.weight, self.norm.bias], 0)[0]},
                )
                through_general = torch.compile(general, **kw)
                through_general(x)
                n = 200 if device == "cuda" else 50
                pairs = []
                for _ in range(args.rounds):
                    pairs.append(
                        (
                            _per_call_us(compiled, x, device, n),
                            _per_call_us(plain, x, device, n),
                            _per_call_us(through_general, x, device, n),
                        )
                    )
                # one graph each, however many calls: more would be recompiles
                row["graphs_compiled"] = int(torch._dynamo.utils.counters["stats"].get("unique_graphs", 0))
                row["compiled_kernel_us"] = round(statistics.median(p[0] for p in pairs), 2)
                row["compiled_original_us"] = round(statistics.median(p[1] for p in pairs), 2)
                row["compiled_general_op_us"] = round(statistics.median(p[2] for p in pairs), 2)
                row["speedup"] = round(statistics.median(p[1] / p[0] for p in pairs), 3)
            report["modes"][name] = row
        torch._dynamo.reset()
        if args.time:
            n = 500 if device == "cuda" else 50
            pairs = []
            for _ in range(args.rounds):
                k = _per_call_us(m, x, device, n)
                PooledLayerNorm.forward = original
                o = _per_call_us(m, x, device, n)
                PooledLayerNorm.forward = patched
                pairs.append((k, o))
            report["eager_loop"] = {
                "kernel_us": round(statistics.median(p[0] for p in pairs), 2),
                "original_us": round(statistics.median(p[1] for p in pairs), 2),
                "speedup": round(statistics.median(o / k for k, o in pairs), 3),
            }
    if args.json:
        print(json.dumps(report))
        return
    print(f"device {device}, x {shape}")
    for name, row in report["modes"].items():
        print(f"  torch.compile {name}: {row}")
    if "eager_loop" in report:
        print(f"  eager loop: {report['eager_loop']}")


if __name__ == "__main__":
    main()
