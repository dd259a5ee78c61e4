"""The textual front door (`cuda-agent chat`, and `optimize` on a terminal): the only package
that imports textual.

A view over a `chat.backend.ChatBackend`. Both apps are the same frame (`shell.AgentShell`: the
conversation, the status bar, the ledger, the worker, approvals and the review) composed with
their own parts: `app.ChatApp` shows a `chat.session.ChatSession` with the prompt (`prompt`) and
the slash commands (`slash`); `task.OptimizeApp` a `chat.optimize_task.TaskRuntime` with its keys
line and its one run. The backend talks back only through the worker's messages (`work`).
`render` holds the rich renderables (no textual), tested on their own.
"""
