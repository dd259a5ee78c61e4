"""The textual front door (`cuda-agent chat`): the only package that imports textual.

`app.ChatApp` renders a `runtime.ChatRuntime`; the pure parts (commands, mentions, ledger,
approval, export, render) hold no textual and are tested on their own.
"""
