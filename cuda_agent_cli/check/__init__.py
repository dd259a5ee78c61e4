"""`cuda-agent check` and `cuda-agent build`: read the manifest of integrated kernels, tell for
each whether it is still correct, current and fast here, and build them ahead of time.

Public API: `run_check(CheckRequest) -> CheckReport` (check.runner), the statuses and rules
(check.status), renderers (check.report), `build_kernels` (check.build).
"""
