"""passhat.runner."""
