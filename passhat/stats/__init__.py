"""passhat.stats."""
