"""The task: what to optimize, for which call, and the reference the harness runs.

target.py parses the target and holds Target and Task; inputs.py is the inputs spec; resolve.py
imports the class through probe.py in a subprocess; capture.py records a call with
capture_hook.py; reference.py writes the workspace's model.py. Nothing is imported here: the
probe runs `python -m cuda_agent_cli.task.probe` in the user's repository and loads only what
it needs.
"""
