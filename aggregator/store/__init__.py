"""The store: SQL only, over a `connection.Connection` (either database); no Flask, no HTTP.

One module per kind of record (surveys, drafts, pending, idempotency, tokens, releases,
responses, counts, accounts, shares); connection.py hides the two databases' differences,
migrations.py holds the schema's numbered steps, storage_key.py the key rows are sealed under.
Failures are domain exceptions (aggregator/exceptions.py).
"""
