"""The language storey."""
