"""Orchestration: the flows that call the store and the algorithm (a campaign's steps, finishing
it, recommending, dispatching, recalibrating). Nothing below `flows` imports it."""
