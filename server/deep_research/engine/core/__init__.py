"""The core storey."""
