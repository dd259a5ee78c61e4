"""Locked harness scripts (compile, verify, profile). The agent never edits these."""
