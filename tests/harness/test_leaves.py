"""The leaves of a call's arguments: every container a reference may take, walked alike in every
process (a real object and its stand-in), rebuilt with the same kinds."""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import NamedTuple

import pytest
import torch

from cuda_agent_cli.resources import tools_dir

sys.path.insert(0, str(tools_dir()))  # the locked job modules import each other by name
import init_objects  # noqa: E402
import leaves  # noqa: E402


@dataclass
class Batch:
    x: torch.Tensor
    lengths: torch.Tensor
    note: str = "train"


@dataclass(frozen=True)
class Frozen:
    x: torch.Tensor


class Pair(NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


class Plain:
    def __init__(self, x: torch.Tensor) -> None:
        self.x = x
        self.scale = 2


def nested() -> list:
    return [
        {"pair": [torch.ones(2), torch.zeros(3)], "n": 4},
        Batch(torch.arange(4.0), torch.tensor([1, 3])),
        Pair(torch.ones(1), torch.full((2,), 5.0)),
        SimpleNamespace(mask=torch.tensor([True, False])),
        OrderedDict(w=torch.eye(2)),
        Plain(torch.ones(2, 2)),
        Frozen(torch.ones(1)),
        7,
    ]


def test_every_tensor_leaf_is_found_in_every_kind_of_container():
    found = leaves.tensor_paths(nested())
    assert found == [
        "[0]['pair'][0]",
        "[0]['pair'][1]",
        "[1].x",
        "[1].lengths",
        "[2][0]",
        "[2][1]",
        "[3].mask",
        "[4]['w']",
        "[5].x",
        "[6].x",
    ]
    assert leaves.nbytes(nested()) == sum(t.numel() * t.element_size() for t in leaves.tensors(nested()))


def test_map_keeps_every_container_kind_and_every_other_value():
    original = nested()
    doubled = leaves.map_tensors(original, lambda t: t * 2)
    assert isinstance(doubled[1], Batch) and doubled[1].note == "train"
    assert isinstance(doubled[2], Pair) and torch.equal(doubled[2].b, torch.full((2,), 10.0))
    assert isinstance(doubled[4], OrderedDict) and isinstance(doubled[5], Plain) and doubled[5].scale == 2
    assert isinstance(doubled[6], Frozen) and torch.equal(doubled[6].x, torch.full((1,), 2.0))
    assert doubled[0]["n"] == 4 and doubled[7] == 7
    # The originals are untouched: new containers, not the old ones written over.
    assert torch.equal(original[1].x, torch.arange(4.0)) and original[0]["pair"][0].sum() == 2


def test_a_stand_in_is_walked_as_the_real_object_is():
    real = nested()
    stand_ins = init_objects.standins(init_objects.portable(real))
    assert leaves.tensor_paths(stand_ins) == leaves.tensor_paths(real)
    for a, b in zip(leaves.tensors(stand_ins), leaves.tensors(real)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("leaf", [torch.nn.Linear(2, 2), len, int, torch.float32])
def test_modules_callables_classes_and_dtypes_are_leaves(leaf):
    assert leaves.items(leaf) is None
