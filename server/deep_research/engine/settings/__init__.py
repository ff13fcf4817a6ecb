"""The settings storey."""
