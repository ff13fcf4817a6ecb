"""The tree storey."""
