"""passhat.api."""
