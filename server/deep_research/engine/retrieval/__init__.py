"""The retrieval storey."""
