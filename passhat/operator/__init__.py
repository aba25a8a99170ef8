"""passhat.operator."""
