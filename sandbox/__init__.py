"""Workspace template copied into every session (this file is not copied)."""
