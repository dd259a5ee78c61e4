"""The requests the harness sends its jobs (harness/jobs.py): each is its type of tools/wire.py,
every required key there and no key the type does not name, whatever the type checker saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_agent_cli.harness import jobs, wire


def _of_type(request: dict[str, Any], kind: Any) -> None:
    assert kind.__required_keys__ <= set(request), f"missing {sorted(kind.__required_keys__ - set(request))}"
    assert set(request) <= kind.__required_keys__ | kind.__optional_keys__, f"not in {kind.__name__}"
    json.dumps(request)  # it travels as a JSON spec file


def _evaluate(tmp_path: Path) -> wire.EvaluateRequest:
    return jobs.evaluate_request(
        device="cpu",
        policy="strict",
        candidate=tmp_path / "model_new.py",
        reference=tmp_path / "model.py",
        inputs_dir=tmp_path / "tensors_in",
        out_dir=tmp_path / "tensors_cand",
        n=5,
        seeds=[11, 12, 13, 14, 15, 16, 17],
        timed_sets=[5, 6],
        extensions_dir=tmp_path / "inline",
        writable=tmp_path / "evaluate",
        confine_writes=True,
        threads=1,
        checks=3,
        one_in=5,
        detect=0.99,
        call_timeout=300.0,
        go_file=tmp_path / "go.json",
        go_timeout=960.0,
        baselines=("compile",),
        peaks=None,
    )


def test_every_request_is_its_type(tmp_path: Path) -> None:
    evaluate = _evaluate(tmp_path)
    _of_type(dict(evaluate), wire.EvaluateRequest)
    evaluate["timing"] = jobs.timing_plan(100, 3, 5, 0, 2**29, 2**28)
    evaluate["plan"] = None
    _of_type(dict(evaluate), wire.EvaluateRequest)
    _of_type(dict(evaluate["timing"]), wire.TimingPlan)
    _of_type(dict(jobs.inputs_request(evaluate, [0, 2, 4])), wire.InputsRequest)
    (tmp_path / "model.py").write_text("class Model: ...\n")
    key = jobs.service_key(tmp_path / "model.py", "cpu", 1, ["compile"], tmp_path / "service.log")
    _of_type(dict(key), wire.ServiceRequest)
    prewarm = jobs.prewarm_request(key, jobs.prewarm_spec(evaluate))
    _of_type(dict(prewarm), wire.ServiceRequest)
    _of_type(dict(prewarm["prewarm"]), wire.BaselinesSpec)
    _of_type(
        dict(jobs.compile_request("cpu", tmp_path / "build", tmp_path, tmp_path / "kernels", tmp_path, tmp_path)),
        wire.CompileRequest,
    )
    _of_type(dict(jobs.pch_request("cpu", str(tmp_path / "pch"))), wire.PchRequest)
    _of_type(
        dict(jobs.inline_build_request("cpu", tmp_path / "m.py", tmp_path / "ext", tmp_path / "out", True)),
        wire.InlineBuildRequest,
    )
    _of_type(dict(jobs.build_done(True, str(tmp_path / "module"))), wire.BuildDone)


def test_the_judge_rebuilds_the_calls_of_the_evaluation_it_judges(tmp_path: Path) -> None:
    evaluate = _evaluate(tmp_path)
    evaluate["plan"] = [{"kind": "float", "signs": True}]
    info: wire.EvaluateResult = {
        "phases": {},
        "verify_calls": [{"id": i, "model": i, "set": i, "seed": 100 + i} for i in range(5)]
        + [{"id": 5, "model": 0, "set": 0, "seed": 100}]
        + [
            {"id": 6, "model": 1, "set": 2, "seed": 8, "weights": {"load": 2}},
            {"id": 7, "model": 1, "set": 3, "seed": 9, "weights": {"step": 11}},
        ],
        "checked_calls": [{"id": 1003, "model": 0, "set": 6, "seed": 7}],
    }
    calls = jobs.judged_calls(info, 5)
    assert [c["role"] for c in calls] == ["verify"] * 5 + ["again", "weights", "weights", "timed"]
    assert [c["id"] for c in calls] == [0, 1, 2, 3, 4, 5, 6, 7, 1003]
    judge = jobs.judge_request(evaluate, calls, {}, [], 1e-2, 1e-2)
    _of_type(dict(judge), wire.JudgeRequest)
    # The same reference, sets, seeds and draws the evaluation used, and its handed-over outputs.
    assert (judge["reference"], judge["inputs_dir"], judge["cand_dir"], judge["seeds"], judge["plan"]) == (
        evaluate["reference"],
        evaluate["inputs_dir"],
        evaluate["out_dir"],
        evaluate["seeds"],
        evaluate["plan"],
    )
