"""The static checks on a candidate, read from its text before anything is built or run.

`check_sources(model_new_source, cpp_sources, policy)` (check.py) gives every finding; `errors`
keeps those that fail the candidate. One module per concern: python.py (model_new.py's AST),
with python_calls.py (the rules on calls), python_inline.py (load_inline's sources and flags),
origin.py (where an object comes from, for the patch rule), python_names.py (the names the
Python rules judge by) and python_source.py (what they share about the source); cpp.py (the
C++/CUDA sources); rules.py (the Finding record and the tables both languages use).
"""

from cuda_agent_cli.harness.static.check import (
    ALLOWED_IMPORTS,
    POLICIES,
    Finding,
    Severity,
    check_cpp,
    check_sources,
    errors,
    strip_cpp_comments_and_strings,
)

__all__ = [
    "ALLOWED_IMPORTS",
    "POLICIES",
    "Finding",
    "Severity",
    "check_cpp",
    "check_sources",
    "errors",
    "strip_cpp_comments_and_strings",
]
