"""The views storey."""
