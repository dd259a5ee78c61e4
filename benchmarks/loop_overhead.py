"""Loop overhead per turn, excluding model and tool time, over a replayed session.

A replay file of N turns (each a tool call with a few KB of arguments) drives the real loop with
the real transcript writer (fsync on), context tracking and compaction; model and tool time is
measured around each call and subtracted from the wall time.

    python benchmarks/loop_overhead.py --turns 200
Goal: under 20 ms per turn.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from cuda_agent_cli.agent.loop import Limits, run_agent
from cuda_agent_cli.agent.session_store import new_session
from cuda_agent_cli.model.replay import ReplayModel


class TrivialTools:
    """Echo-like tools: outputs of a realistic size, no real work."""

    def __init__(self, output_chars: int) -> None:
        self.output = "x" * output_chars
        self.seconds = 0.0
        self.profiles = 0

    def schemas(self) -> list[dict[str, Any]]:
        s = {"type": "string"}
        return [
            {
                "type": "function",
                "function": {
                    "name": "Write",
                    "description": "write",
                    "parameters": {
                        "type": "object",
                        "properties": {"file_path": s, "content": s},
                        "required": ["file_path", "content"],
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "Profile",
                    "description": "profile",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ]

    def call(self, name: str, args: dict[str, Any]) -> Any:
        t0 = time.perf_counter()
        from types import SimpleNamespace

        data = None
        if name == "Profile":
            self.profiles += 1
            speed = 1.0 + (self.profiles % 7) / 10
            data = {
                "compiled": True,
                "correct": True,
                "reward": 3,
                "checks": [],
                "errors": [],
                "timings": {"speedup_vs_eager": speed, "speedup_vs_compile": speed / 1.3},
            }
        out = SimpleNamespace(output=self.output, is_error=False, data=data)
        self.seconds += time.perf_counter() - t0
        return out


class TimedModel:
    def __init__(self, inner: ReplayModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.context_window = None
        self.seconds = 0.0

    def complete(self, messages, tools, on_text=None):
        t0 = time.perf_counter()
        try:
            return self.inner.complete(messages, tools, on_text)
        finally:
            self.seconds += time.perf_counter() - t0

    def count_tokens(self, messages):
        return self.inner.count_tokens(messages)


def write_replay(path: Path, turns: int, content_chars: int) -> None:
    with path.open("w") as fh:
        for i in range(turns):
            if i % 5 == 4:
                call = {"name": "Profile", "arguments": {}}
            else:
                call = {
                    "name": "Write",
                    "arguments": {"file_path": f"kernels/k{i % 3}.cu", "content": "/*k*/" * (content_chars // 5)},
                }
            fh.write(json.dumps({"content": f"Step {i}: trying the next idea.", "tool_calls": [call]}) + "\n")


def run_once(turns: int, output_chars: int, content_chars: int, fsync: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        replay = root / "session.jsonl"
        write_replay(replay, turns, content_chars)
        ws = root / "ws"
        (ws / "kernels").mkdir(parents=True)
        (ws / "model_new.py").write_text("class ModelNew: pass\n")
        model = TimedModel(ReplayModel.from_file(replay))
        tools = TrivialTools(output_chars)
        state = new_session(data_dir=root / "data")
        events = []
        t0 = time.perf_counter()
        result = run_agent(
            model,
            tools,
            state=state,
            prompt="task",
            system_prompt="S" * 16000,
            settings={"policy": "strict"},
            workspace_root=ws,
            limits=Limits(max_turns=turns + 1),
            sink=events.append,
            fsync=fsync,
        )
        wall = time.perf_counter() - t0
        n = result.turns
        overhead = wall - model.seconds - tools.seconds
        return {
            "turns": n,
            "wall_s": wall,
            "overhead_ms_per_turn": overhead / n * 1000,
            "compactions": result.compactions,
            "events": len(events),
            "transcript_kb": state.transcript_path.stat().st_size // 1024,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--output-chars", type=int, default=2000, help="size of each tool output")
    ap.add_argument("--content-chars", type=int, default=3000, help="size of each call's arguments")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-fsync", action="store_true")
    ns = ap.parse_args()
    runs = [run_once(ns.turns, ns.output_chars, ns.content_chars, not ns.no_fsync) for _ in range(ns.repeats)]
    per_turn = [r["overhead_ms_per_turn"] for r in runs]
    print(f"machine: {platform.machine()}, {platform.python_version()}, {platform.system()}")
    print(
        f"turns: {runs[0]['turns']}, compactions: {runs[0]['compactions']}, transcript: {runs[0]['transcript_kb']} KiB, "
        f"fsync: {not ns.no_fsync}"
    )
    print(
        f"loop overhead per turn: median {statistics.median(per_turn):.2f} ms, "
        f"min {min(per_turn):.2f} ms, max {max(per_turn):.2f} ms (goal < 20 ms)"
    )


if __name__ == "__main__":
    main()
