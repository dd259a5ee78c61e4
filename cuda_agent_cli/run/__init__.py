"""The session runner: task -> workspace -> harness -> agent -> best candidate -> write-back plan.

One path for every front door that runs the agent on a kernel (`optimize`, `demo`, the chat's
/optimize, agent-mode `bench`): session.py sequences it, settings.py resolves the configuration
once (with the resumed session's own settings as a layer), checks.py refuses what would fail
before any model call. It never prints; the review and the yes belong to the front door.
"""
