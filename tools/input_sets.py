"""Locked: the input sets the inputs job wrote, loaded back, and models built from them.

Read by every process that runs a model on them: the candidate's (candidate.py), the
baselines' (baselines.py) and the judge (verify_kernels.py). A set holds the reference's init
arguments, its weights and its inputs (torch.save, read with weights_only=True); constructor
arguments that are objects of the user's code come as the real objects in the trusted processes
and as stand-ins in the candidate's (init_objects.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import init_objects
import torch
from worker_common import to_device


def load_set(path: Path, objects: str = "real") -> Any:
    """One input set. Constructor arguments and inputs that are objects of the user's code come as the
    real objects (`objects="real"`: a trusted process with the reference loaded) or as stand-ins
    (`"stand-ins"`: the candidate's process, which never imports the reference); either way in
    payload["init_args"], while payload["init"] keeps what the fingerprints cover."""
    # Memory-mapped: a 64 MB tensor then costs one copy (to the device, or a clone), not two.
    payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    if payload.get("init_pickle"):
        payload["init_args"] = (
            init_objects.load_real(path.parent, payload)
            if objects == "real"
            else init_objects.standins(payload["init"])
        )
    if payload.get("inputs_pickle"):
        # Inputs in the user's own classes (a dataclass batch, a namedtuple): the same leaves
        # either way (tools/leaves.py), so every process draws and fingerprints them alike.
        payload["inputs"] = (
            init_objects.load_real(path.parent, payload, "inputs")
            if objects == "real"
            else init_objects.standins(payload["inputs"])
        )
    return payload


def weights_fit(own: dict[str, Any], state: dict[str, Any]) -> bool:
    """Same keys and shapes: the reference's exact weights can be given to this model."""
    return set(own) == set(state) and all(own[k].shape == state[k].shape for k in own)


def build_model(cls: type, payload: dict[str, Any], device: str, seed: int) -> tuple[Any, str]:
    import random

    random.seed(seed)
    torch.manual_seed(seed)
    model = cls(*to_device(payload.get("init_args", payload["init"]), "cpu"))
    note = "seeded init"
    state = payload["state"]
    if isinstance(model, torch.nn.Module):
        if weights_fit(model.state_dict(), state):
            model.load_state_dict(state)
            note = "reference weights"
        model = model.to(device)
    return model, note


class InputSets:
    """Input sets and weights written by the inputs job, loaded once each."""

    def __init__(self, folder: Path, device: str, objects: str = "real") -> None:
        self.folder, self.device, self.objects = folder, device, objects
        self.payloads: dict[int, dict[str, Any]] = {}
        self.inputs: dict[int, list[Any]] = {}

    def payload(self, k: int) -> dict[str, Any]:
        if k not in self.payloads:
            self.payloads[k] = load_set(self.folder / f"inputs_{k}.pt", self.objects)
        return self.payloads[k]

    def device_inputs(self, k: int) -> list[Any]:
        if k not in self.inputs:
            self.inputs[k] = to_device(self.payload(k)["inputs"], self.device)
        return self.inputs[k]
