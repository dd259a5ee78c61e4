"""Context management: output caps, where compaction cuts, what the summary keeps."""

from __future__ import annotations

import json

from cuda_agent_cli.agent.context import (
    MAX_TOOL_OUTPUT_CHARS,
    build_summary,
    compaction_span,
    context_budget,
    truncate_output,
)
from cuda_agent_cli.agent.session_store import CandidateRecord
from cuda_agent_cli.harness_result import HarnessResult


def test_truncate_keeps_head_and_tail_within_the_limit():
    text = "HEAD" + "x" * 100_000 + "TAIL"
    out = truncate_output(text)
    assert len(out) <= MAX_TOOL_OUTPUT_CHARS
    assert out.startswith("HEAD") and out.endswith("TAIL")
    assert "characters cut from the middle" in out
    assert truncate_output("short") == "short"


def test_budget_never_exceeds_the_models_window():
    assert context_budget(None, None) == 131_072
    assert context_budget(None, 32_768) == 32_768
    assert context_budget(50_000, 200_000) == 50_000


def _conversation(turns: int) -> list[dict]:
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "task"}]
    for i in range(turns):
        calls = [
            {"id": f"c{i}a", "type": "function", "function": {"name": "Read", "arguments": "{}"}},
            {"id": f"c{i}b", "type": "function", "function": {"name": "Read", "arguments": "{}"}},
        ]
        msgs.append({"role": "assistant", "content": f"t{i}", "tool_calls": calls})
        msgs += [{"role": "tool", "tool_call_id": c["id"], "content": "r"} for c in calls]
    return msgs


def test_span_keeps_head_and_recent_turns_and_never_splits_calls():
    msgs = _conversation(10)
    start, end = compaction_span(msgs, keep_turns=3)
    assert start == 2
    assert msgs[end]["role"] == "assistant" and msgs[end]["content"] == "t7"
    kept = msgs[end:]
    ids = {c["id"] for m in kept for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in ids for m in kept if m["role"] == "tool")
    assert compaction_span(_conversation(3), keep_turns=3) is None


def test_summary_keeps_rules_best_results_and_files():
    removed = [
        {
            "role": "assistant",
            "content": "first try",
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {
                        "name": "Write",
                        "arguments": json.dumps({"file_path": "kernels/a.cu", "content": "x"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": "ok"},
        {
            "role": "assistant",
            "content": "profiling now",
            "tool_calls": [{"id": "2", "type": "function", "function": {"name": "Profile", "arguments": "{}"}}],
        },
    ]
    result = HarnessResult.from_json(
        {
            "compiled": True,
            "correct": True,
            "reward": 3,
            "checks": [],
            "timings": {
                "eager_us": 30.0,
                "compile_us": 15.0,
                "speedup_vs_eager": 2.5,
                "speedup_vs_compile": 1.25,
                "candidate_us": 12.0,
            },
        }
    )
    failed = HarnessResult.from_json(
        {
            "compiled": True,
            "correct": False,
            "reward": -1,
            "errors": ["max abs error 0.5"],
            "checks": [{"name": "correctness", "passed": False, "detail": ""}],
        }
    )
    best = CandidateRecord(4, "Profile", "2", result, (3.0, 1.25, 2.5), None)
    text = build_summary(
        removed,
        "strict",
        best,
        [{"turn": 4, "tool": "Profile", "result": result}, {"turn": 6, "tool": "Verify", "result": failed}],
    )
    assert "strict" in text and "torch compute ops" in text
    assert "Best result so far: turn 4 Profile, reward 3 (2.50x vs eager, 1.25x vs torch.compile" in text
    assert (
        "turn 6 Verify: compiled, NOT correct, reward -1; failed checks: correctness; first error: max abs error 0.5"
        in text
    )
    assert "kernels/a.cu" in text and "Profile x1" in text and "profiling now" in text
    # A second compaction keeps the history lines of the first summary.
    again = build_summary([{"role": "user", "content": text}], "strict", best, [])
    assert "kernels/a.cu" in again


def test_summary_without_a_best_result_says_so():
    assert "none yet" in build_summary([], "hybrid", None, [])
