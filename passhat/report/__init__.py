"""passhat.report."""
