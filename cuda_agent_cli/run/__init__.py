"""The session runner: task -> workspace -> harness -> agent -> best candidate -> write-back plan.

One path for every front door that runs the agent on a kernel (`optimize`, `demo`, the chat's
/optimize, agent-mode `bench`): optimize.py sequences it and resolves the configuration once a
run (`resolve_config`), settings.py keeps a session's task.json (its settings a layer on resume),
checks.py refuses what would fail before any model call. It never prints; the review and the
yes belong to the front door.
"""
