"""The audit: re-check everything from stored bytes alone (LEDGER.md section 6).

``engine`` runs one streaming pass over a snapshot; ``rows`` holds the row checks (chain, canonical
form, Merkle nodes) that ``worker`` can run in a second process; ``rules`` re-checks the
commitment rules and replays every verification; ``report`` is the verdict and its codes.
"""
