"""`cuda-agent bench`: task suites scored by the harness, with the paper's metrics.

suite (loading and identity) -> solutions (existing candidates) -> task_run (one task, one
record) -> runner / ray_runner (scheduling) -> store (results.jsonl) -> metrics -> report.
`run.plan_bench` checks everything before a task runs; `run.run_bench` runs and reports.
"""
