"""Transparency: the Merkle tree, signed notes and checkpoints, proofs, and exports
(LEDGER.md section 7). Witness cosignatures and timestamps belong here too.
"""
