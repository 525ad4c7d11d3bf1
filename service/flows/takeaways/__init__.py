"""Take-aways: a campaign as one file (the bundle) and back, its measurements as a table, its
report."""
