"""Applying an answer to its sites: the plan, the hand-over to the sites' workers, confirming,
rolling back, settling, the failover watcher."""
