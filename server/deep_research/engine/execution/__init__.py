"""The execution storey."""
