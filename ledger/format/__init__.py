"""The entry format (``entries``: body, hash, time, kinds) and each kind's payload (``payloads``)
(LEDGER.md sections 3 and 4).
"""
