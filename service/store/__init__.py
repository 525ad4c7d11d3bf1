"""Data access: small functions that take a session and keyword arguments, one module per table
group. They flush but never commit (the caller owns the transaction) and never call a flow."""

# Registers the answer generation's session hooks before any session writes.
from . import answer_generation  # noqa: F401
