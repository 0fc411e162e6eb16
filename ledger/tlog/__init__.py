"""Transparency-log primitives, below the store (LEDGER.md section 7): the RFC 9162 Merkle tree,
C2SP signed notes and checkpoints, C2SP cosignatures and the tlog-witness decision, RFC 3161
timestamps, and the one bounded HTTP exchange with a peer. They import nothing of ``ledger`` but
``ledger.errors``; the store, the format and ``ledger.transparency`` import them, never the reverse.
"""
