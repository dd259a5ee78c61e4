"""Writing a verified kernel into the user's repository: diff, integration, manifest, git.

Nothing here writes until `apply.apply_plan` is called, which happens only after the review.
"""
