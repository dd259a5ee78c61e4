"""Models: the litellm adapter (the only importer of litellm), replay and scripted models."""
