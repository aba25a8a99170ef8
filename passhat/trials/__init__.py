"""passhat.trials."""
