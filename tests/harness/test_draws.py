"""How every call draws its inputs anew (threats 30, 31, 39, 40): rules found on the reference,
structure kept where the reference needs it, values and zero patterns new on every call."""

from __future__ import annotations

import sys

import torch

from cuda_agent_cli.resources import tools_dir

sys.path.insert(0, str(tools_dir()))  # the locked job modules import each other by name
import draws  # noqa: E402
import leaves  # noqa: E402


def clone(obj):
    return leaves.map_tensors(obj, lambda t: t.detach().clone())


def plan_for(fn, inputs):
    return draws.find_plan(lambda args: fn(*args), inputs, clone)


def call(inputs, plan, seed):
    return draws.redraw(clone(inputs), seed, plan)


def test_ids_and_offsets_of_a_bag_are_drawn_anew_and_the_bag_still_runs():
    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(512, 16, mode="sum")
    ids = torch.randint(0, 512, (256,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.sort(torch.randperm(255)[:31] + 1).values])
    plan = plan_for(bag, [ids, offsets])
    assert [r["kind"] for r in plan] == ["int", "int_sorted"]
    seen = set()
    for seed in range(6):
        new_ids, new_offsets = call([ids, offsets], plan, seed)
        bag(new_ids, new_offsets)  # valid: starts at 0, never decreases, ids in range
        assert int(new_offsets[0]) == 0 and bool((new_offsets.diff() >= 0).all())
        seen.add((tuple(new_ids[:8].tolist()), tuple(new_offsets[:8].tolist())))
    assert len(seen) == 6


def test_lengths_that_must_add_up_keep_their_sum_and_change():
    table = torch.randn(1024, 8)
    cuts = torch.sort(torch.randperm(1023)[:31] + 1).values
    bounds = torch.cat([torch.zeros(1, dtype=torch.long), cuts, torch.full((1,), 1024, dtype=torch.long)])
    lengths = bounds[1:] - bounds[:-1]

    def segments(lengths):
        return torch.stack([p.sum(0) for p in table.split(lengths.tolist())])

    plan = plan_for(segments, [lengths])
    assert plan[0]["kind"] == "int_sum"
    drawn = [call([lengths], plan, seed)[0] for seed in range(5)]
    assert all(int(d.sum()) == 1024 and int(d.min()) >= int(lengths.min()) for d in drawn)
    assert len({tuple(d.tolist()) for d in drawn}) == 5 and not any(torch.equal(d, lengths) for d in drawn)


def test_a_masks_zeros_move_from_call_to_call():
    x, mask = torch.randn(64, 64), torch.tril(torch.ones(64, 64))
    plan = plan_for(lambda x, m: (x * m).sum(-1), [x, mask])
    assert plan[1]["kind"] == "float" and plan[1]["special"][0][0] == 0.0
    zeros = [(call([x, mask], plan, seed)[1] == 0) for seed in range(4)]
    share = float(zeros[0].float().mean())
    assert abs(share - float((mask == 0).float().mean())) < 0.05
    # Above the diagonal, where the set had only zeros, most elements now hold values.
    assert float(zeros[0].triu(1).float().mean()) < 0.7
    assert not torch.equal(zeros[0], zeros[1]) and not torch.equal(zeros[2], zeros[3])


def test_an_additive_mask_keeps_a_value_in_every_row():
    scores = torch.randn(32, 128)
    mask = torch.zeros(32, 128).masked_fill(torch.rand(32, 128) < 0.5, float("-inf"))
    plan = plan_for(lambda s, m: torch.softmax(s + m, -1), [scores, mask])
    assert plan[1]["kind"] == "float" and [v for v, _ in plan[1]["special"]] == [float("-inf")]
    drawn = call([scores, mask], plan, 1)[1]
    assert bool(torch.isinf(drawn).any()) and not torch.equal(torch.isinf(drawn), torch.isinf(mask))


def test_a_leaf_the_reference_needs_as_it_is_is_kept_and_named():
    weights = torch.randn(4, 8)
    key = torch.tensor([3, 1, 2, 0])

    def strict(x, order):
        if order.tolist() != [3, 1, 2, 0]:
            raise ValueError("only this order")
        return x[order] @ weights

    inputs = [torch.randn(4, 4), key]
    plan = plan_for(strict, inputs)
    assert plan[0]["kind"] == "float" and plan[1]["kind"] == "keep"
    assert draws.kept_leaves(plan, inputs) == ["[1]"]


def test_every_leaf_in_a_dict_is_drawn():
    inputs = [{"x": torch.randn(8, 8), "ids": torch.randint(0, 10, (8,)), "on": torch.rand(8) < 0.5}]
    plan = plan_for(lambda b: b["x"][b["ids"] % 8].sum() + b["on"].sum(), inputs)
    assert [r["kind"] for r in plan] == ["float", "int", "bool"]
    a, b = call(inputs, plan, 1)[0], call(inputs, plan, 2)[0]
    for key in ("x", "ids", "on"):
        assert not torch.equal(a[key], b[key]), key


def test_the_same_seed_gives_the_same_bits_in_every_process():
    inputs = [torch.randn(300, 300), torch.tril(torch.ones(300, 300)), torch.randint(0, 5, (3, 40))]
    plan = plan_for(lambda x, m, i: (x * m).sum() + i.sum(), inputs)
    one, two = call(inputs, plan, 42), call(inputs, plan, 42)
    assert all(torch.equal(a, b) for a, b in zip(one, two))


def test_a_stray_exact_zero_in_random_data_is_not_a_mask():
    x = torch.randn(4096)
    x[17] = 0.0
    plan = plan_for(lambda t: t.sum(), [x])
    assert plan == [{"kind": "float", "signs": True}]
