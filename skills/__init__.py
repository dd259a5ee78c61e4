"""The agent's skill text."""
