"""A small toolbox for agent-loop tests: Write/Read on a real directory, and a Profile whose
harness results are queued by the test as JSON objects (the real harness is exercised by its own
tests)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent_cli.harness_result import HarnessResult


@dataclass
class Result:
    output: str
    is_error: bool = False
    data: dict[str, Any] | None = None
    harness_result: HarnessResult | None = None


def harness_result(
    correct: bool = True, reward: int | None = 1, eager: float = 1.0, compile_: float = 1.0
) -> dict[str, Any]:
    return {
        "compiled": True,
        "correct": correct,
        "reward": reward if correct else -1,
        "device": "cpu",
        "policy": "strict",
        "errors": [] if correct else ["output mismatch"],
        "warnings": [],
        "checks": [{"name": "correctness", "passed": correct, "detail": ""}],
        "timings": {
            "eager_us": 10.0,
            "compile_us": 10.0,
            "candidate_us": 10.0 / eager,
            "speedup_vs_eager": eager,
            "speedup_vs_compile": compile_,
            "method": "events",
            "trials": 10,
        }
        if correct
        else None,
        "environment": {"gpu": None, "torch": "2.13", "cuda": None},
    }


class ToyBox:
    def __init__(self, root: Path, profiles: list[dict[str, Any]] | None = None, hook: Any = None) -> None:
        self.root = root
        self.profiles = list(profiles or [])
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.hook = hook

    def schemas(self) -> list[dict[str, Any]]:
        def fn(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
            return {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"{name} tool",
                    "parameters": {
                        "type": "object",
                        "properties": props,
                        "required": required,
                        "additionalProperties": False,
                    },
                },
            }

        s = {"type": "string"}
        return [
            fn("Write", {"file_path": s, "content": s}, ["file_path", "content"]),
            fn("Read", {"file_path": s, "limit": {"type": "integer"}}, ["file_path"]),
            fn("Profile", {}, []),
        ]

    def call(self, name: str, args: dict[str, Any]) -> Result:
        self.calls.append((name, args))
        if self.hook:
            self.hook(name, args)
        if name == "Write":
            p = self.root / args["file_path"]
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(args["content"])
            return Result(f"wrote {args['file_path']}")
        if name == "Read":
            p = self.root / args["file_path"]
            if not p.is_file():
                return Result(f"{args['file_path']} does not exist", True)
            return Result(p.read_text())
        if name == "Profile":
            data = self.profiles.pop(0) if self.profiles else harness_result(False)
            return Result(f"reward {data['reward']}", not data["correct"], harness_result=HarnessResult.from_json(data))
        return Result(f"unknown tool {name}", True)
