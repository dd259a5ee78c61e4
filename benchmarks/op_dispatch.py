"""Where a compiled call of an applied module spends its host time: torch.compile's own cost per
call, the kernel's torch.library op against the loader's eager route, and what the op's
registration costs (a Python kernel, with and without the autograd layer).

    python benchmarks/op_dispatch.py <applied demo repository>      # e.g. after cuda-agent demo --dir D

Tiny tensors, one thread, best of 7 rounds: host cost only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable


def best_us(fn: Callable[[], object], calls: int = 2000, rounds: int = 7) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return round(best, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo")
    args = parser.parse_args()
    sys.path.insert(0, args.repo)
    import torch
    from vit_head import PooledLayerNorm

    torch.set_num_threads(1)
    rows: dict[str, float] = {}

    class AddOne(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    tiny = torch.randn(4)
    with torch.no_grad():
        eager = AddOne()
        compiled = torch.compile(eager)
        compiled(tiny)
        rows["compiled module adding 1 to 4 floats"] = best_us(lambda: compiled(tiny))
        rows["the same module, eager"] = best_us(lambda: eager(tiny))

        op_name = PooledLayerNorm.forward._cuda_agent_op
        ns, short = op_name.split("::")
        op_call = getattr(getattr(torch.ops, ns), short).default
        op = PooledLayerNorm.forward.__globals__["_registry"]().ops[op_name]
        verified = json.load(open(f"{args.repo}/_cuda_agent/pooled_layer_norm/verified.json"))
        dim = verified["families"][0]["init"][0]["spec"]["value"]
        m = PooledLayerNorm(dim).eval()
        x = torch.randn(1, 1, dim, device=verified["device"])
        m = m.to(verified["device"])
        params = [m.norm.weight, m.norm.bias]
        rows["the op, no grad"] = best_us(lambda: op_call([x], params, 0))
        nograd = getattr(getattr(torch.ops, ns), short + "_nograd").default
        rows["the op's variant without autograd, no grad"] = best_us(lambda: nograd([x], params, 0))
        rows["the loader's eager route (op.kernel)"] = best_us(lambda: op.kernel([x], params, 0))
        family = op.families[0]
        if family.direct_op is not None:
            eps = float(m.norm.eps)
            direct = family.direct_op
            fn = sys.modules["_cuda_agent_ops"].direct[direct._schema.name][0]
            rows["the direct op (the extension function as the operator)"] = best_us(
                lambda: direct(x, params[0], params[1], eps)
            )
            rows["the extension function, bare"] = best_us(lambda: fn(x, params[0], params[1], eps))

            class Twin(torch.nn.Module):
                def __init__(self, norm: torch.nn.Module) -> None:
                    super().__init__()
                    self.norm = norm

                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    return direct(x, self.norm.weight, self.norm.bias, eps)

            # A module at the family's shape: torch.compile of the patched class against a module
            # that calls the direct op and nothing else (the guards the loader's route adds).
            shape = family.spec["args"][0]["spec"]["tensor"]["shape"]
            xs = torch.randn(*shape, device=verified["device"])
            twin = torch.compile(Twin(m.norm))
            patched = torch.compile(m)
            twin(xs)
            patched(xs)
            rows["compiled: a module calling the direct op"] = best_us(lambda: twin(xs), calls=200)
            rows["compiled: the patched module"] = best_us(lambda: patched(xs), calls=200)
        else:
            rows["the direct op"] = float("nan")  # ModelNew.forward is not one extension call

        def plain(inputs: list, params: list, family: int) -> list:
            return [inputs[0] + params[0]]

        libs = []
        for name, autograd in (("with_autograd", True), ("without_autograd", False)):
            lib = torch.library.Library(f"dispatch_{name}", "DEF")
            libs.append(lib)
            lib.define("f(Tensor[] inputs, Tensor[] params, int family) -> Tensor[]")
            lib.impl("f", plain, "CompositeExplicitAutograd")
            if autograd:
                torch.library.register_autograd(
                    f"dispatch_{name}::f", lambda ctx, g: (None, None, None), setup_context=lambda *a: None, lib=lib
                )
            f = getattr(torch.ops, f"dispatch_{name}").f.default
            rows[f"a Python-kernel op, {name.replace('_', ' ')}"] = best_us(lambda f=f: f([tiny], [tiny], 0))
        rows["the Python function alone"] = best_us(lambda: plain([tiny], [tiny], 0))
    for k, v in rows.items():
        print(f"{k:56s} {v:8.2f} us")


if __name__ == "__main__":
    main()
