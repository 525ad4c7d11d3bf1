"""Orchestration: the flows that call the store and the algorithm, one package per domain:
`campaign`, `answers`, `takeaways`, `applying`, `scheduling` (docs/design.md). Nothing below
`flows` imports it."""
