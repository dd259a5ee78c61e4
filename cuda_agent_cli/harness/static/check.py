"""Static checks on a candidate: the AST of model_new.py and the C++/CUDA sources.

The second line of defence behind the runtime guards (tools/integrity.py, tools/op_guard.py and
tools/output_checks.py, which check what actually runs): these catch the bypasses of docs/security.md before anything is compiled or run. A try/except
fallback to torch, reusing the reference, imports outside the allowlist, frame and code
introspection, monkeypatches of anything the file did not create, dynamic code, threads and
processes, unsynchronized streams, torch ops where the policy forbids them, the CPython API and
embedded Python in C++, file and environment access. The Python rules live in python.py (with
python_calls.py and python_inline.py), the C++ rules in cpp.py; this module only reads text,
imports nothing heavy and never executes candidate code.
"""

from __future__ import annotations

from typing import Iterable

from cuda_agent_cli.config import POLICIES, Policy
from cuda_agent_cli.harness.static.cpp import check_cpp, strip_cpp_comments_and_strings
from cuda_agent_cli.harness.static.python import PythonChecker
from cuda_agent_cli.harness.static.python_names import ALLOWED_IMPORTS
from cuda_agent_cli.harness.static.rules import Finding, Severity

__all__ = [
    "ALLOWED_IMPORTS",
    "POLICIES",
    "Finding",
    "Severity",
    "check_cpp",
    "check_sources",
    "errors",
    "strip_cpp_comments_and_strings",
]


def check_sources(model_new_source: str, cpp_sources: dict[str, str], policy: Policy) -> list[Finding]:
    """All findings for a candidate, in source order: model_new.py first, then each C++ file.

    `cpp_sources` maps a display path (e.g. "kernels/add.cu") to its text. C++ embedded in
    model_new.py for `torch.utils.cpp_extension.load_inline` is checked as C++ too.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    findings: list[Finding] = []
    py = PythonChecker(model_new_source, policy)
    findings.extend(py.run())
    for label, source in py.inline_cpp:
        findings.extend(check_cpp(source, label, policy))
    for path in sorted(cpp_sources):
        findings.extend(check_cpp(cpp_sources[path], path, policy))
    return findings


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]
