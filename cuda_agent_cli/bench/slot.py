"""A bench slot: a long-lived process that runs one task at a time for the local pool.

It is started with CUDA_VISIBLE_DEVICES naming its one GPU, so the harness processes it starts
see only that GPU. Jobs come in as JSON lines on stdin; each record goes back as one JSON line on
the protocol stream (the original stdout). Anything else that writes to stdout in this process
or its children lands on stderr instead, so it cannot be mistaken for a record. A compile-ahead
worker is the same process given jobs marked `"stage": "prebuild"`: it builds, it times nothing.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from cuda_agent_cli.bench.prebuild import prebuild
    from cuda_agent_cli.bench.task_run import run_task

    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            record = prebuild(job) if job.get("stage") == "prebuild" else run_task(job)
        except KeyboardInterrupt:
            return 130
        protocol.write(json.dumps(record) + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
