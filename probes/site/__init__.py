"""A real or emulated site: describing it, applying an answer on it, failing over."""
