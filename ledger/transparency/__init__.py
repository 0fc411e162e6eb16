"""Transparency over a stored ledger (LEDGER.md section 7): checkpoints and proofs of the stored
tree, export and its strict reader, offline proof checks, witnessing and timestamping a
checkpoint, the witness server, ``ledger when`` and the anchoring policy. The primitives they use
(tree, notes, cosignatures, timestamps) are ``ledger.tlog``, below the store.
"""
