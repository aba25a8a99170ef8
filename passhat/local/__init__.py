"""passhat.local."""
