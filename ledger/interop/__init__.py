"""Derived views of a ledger for other tools (issue 18): ``browse.py`` builds the database that
Datasette opens; ``attest.py`` writes and checks in-toto/SLSA attestations (LEDGER.md section 7).
A view is rebuilt from the ledger, opened read-only, and is never its source of truth."""
