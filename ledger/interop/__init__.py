"""Derived views of a ledger for other tools (issue 18): ``browse.py`` builds the database that
Datasette opens. A view is rebuilt from the ledger, opened read-only, and is never its source of
truth."""
