"""The trusted harness: compile, verify and profile candidates in separate processes.

Public API: `Harness(workspace, device, policy, atol, rtol)` with compile()/verify()/profile(),
each returning a `HarnessResult` (cuda_agent_cli.harness_result, re-exported here; to_json() is the
harness result object of docs/architecture.md); `verify_path` and `profile_path` for
`cuda-agent verify|profile`; `warm_worker` for a process about to score many references.
"""

from cuda_agent_cli.harness.driver import Harness, open_path, profile_path, verify_path, warm_worker
from cuda_agent_cli.harness_result import Check, HarnessResult, Timings

__all__ = ["Check", "Harness", "HarnessResult", "Timings", "open_path", "profile_path", "verify_path", "warm_worker"]
