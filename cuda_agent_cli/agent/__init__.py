"""The agent: the loop (loop.py), its events and transcript, sessions, context and prompts."""
