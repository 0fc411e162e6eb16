"""Storage: objects by address and entries with their Merkle nodes (LEDGER.md section 2).

``sqlite`` is the SQLite store; a second store (PostgreSQL) comes next to it and implements the
same interface (docs/ARCHITECTURE.md, "The store interface"). Storage holds no policy.
"""
