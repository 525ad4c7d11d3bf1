"""Probe tools: each backend, the run they share, the registry and the tool choice."""
