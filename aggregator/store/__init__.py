"""The store: SQL only, over a `connection.Connection` (either database); no Flask, no HTTP."""
