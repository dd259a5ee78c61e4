"""The chat session, apart from its screen (no textual here): `session.ChatSession` (repository,
model, sandboxed tools with their approval gate, transcript, chat.json),
`optimize_task.TaskRuntime` (one optimize session as the same screen shows it), the
`backend.ChatBackend` both implement for tui/, and the pure parts: `ledger`, `approval`,
`mentions`, `commands` (the slash-command table), `export`, `undo` and `history` (a conversation
rebuilt from a transcript's events).
"""
