"""Verifier-owned programs mounted read-only at ``/harness`` in every sandboxed run (stdlib only:
they run under the plan's interpreter, with nothing of the ledger installed)."""
