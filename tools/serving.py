"""Locked: what the two processes that only execute calls share, the candidate's (candidate.py)
and the baselines' (baselines.py): the loop that answers the controller's requests over their
channel, the stand-in the null calls make instead of a model, the size of an output, and CUDA's
warm-up before any snapshot.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import channel
import torch

# One request's handler: the request in, the reply out.
Handler = Callable[[dict[str, Any]], dict[str, Any]]


def serve(chan: channel.Channel, handlers: Mapping[str, Handler]) -> None:
    """Answer each request with the handler of its op until a `finish` or the channel closes."""
    while True:
        try:
            request = chan.recv()
        except channel.ChannelClosed:
            return
        op = request.get("op")
        if not isinstance(op, str) or op not in handlers:
            chan.send({"ok": False, "error": f"unknown request {op!r}"})
            continue
        reply = handlers[op](request)
        chan.send(reply)
        if op == "finish":
            return


def warm_up_cuda() -> None:
    """Initialize CUDA, the caching allocator and cuBLAS the way any candidate's first call would."""
    torch.cuda.init()
    x = torch.ones(64, 64, device="cuda")
    (x @ x).sum().item()
    torch.cuda.synchronize()


# The most ops beyond its outputs' allocations that the stand-in dispatches for a null call.
STAND_IN_OPS_MOST = 64


def stand_in(template: Any, ops: int = 0) -> Any:
    """A callable returning new, unfilled outputs shaped like `template`, dispatching `ops` ops
    in all (its outputs' allocations, then empty ones): the op guard's dispatch of each op a
    real forward runs is host time around the call that its device events never see, and the
    null blocks that measure that time must pay it too, or the clock's bound charges it to the
    kernel."""
    items = template if isinstance(template, (tuple, list)) else [template]
    tensors = [t for t in items if isinstance(t, torch.Tensor)]
    where = tensors[0].device if tensors else torch.device("cpu")
    extra = max(0, min(int(ops) - len(tensors), STAND_IN_OPS_MOST))

    def outputs(*args: Any) -> Any:
        for _ in range(extra):
            torch.empty(0, device=where)
        made = [torch.empty_like(t) for t in tensors]
        return made[0] if not isinstance(template, (tuple, list)) else tuple(made)

    return outputs


def output_bytes(out: Any) -> int:
    items = out if isinstance(out, (tuple, list)) else [out]
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))
