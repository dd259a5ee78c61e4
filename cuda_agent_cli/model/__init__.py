"""Models: the litellm adapter (the only importer of litellm), replay and scripted models."""

import os as _os

# litellm must never fetch its price map over the network when imported, whichever module of
# this package (or a test next to it) imports litellm first.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
