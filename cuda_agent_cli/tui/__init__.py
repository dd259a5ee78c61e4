"""The textual front door (`cuda-agent chat`, and `optimize` on a terminal): the only package
that imports textual.

A view over a `chat.backend.ChatBackend`: `app.ChatApp` shows a `chat.session.ChatSession`,
`task.OptimizeApp` a `chat.optimize_task.TaskRuntime`; what they share is
`agent_app.AgentApp`, with the `conversation.Conversation` widget, the slash commands
(`slash`), the screens and widgets. `render` holds the rich renderables (no textual), tested on
their own.
"""
