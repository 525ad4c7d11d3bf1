"""Running a campaign: planning it, dispatching it to an executor, its phases, a probe's timing
and run, the leases, recording results and the budget, finishing it."""
