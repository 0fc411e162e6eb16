"""The writer signatures of format-2 entries (LEDGER.md section 6, "Writer signatures").

Every audit checks that each format-2 entry's signature verifies with the key the entry names
(``entry-signature-invalid``); that says which key appended the entry, not whether a reader
trusts it. Given a trusted-signers file (``ledger audit --signers FILE``), it also reports a
valid signature by a key the file does not list (``entry-signer-unknown``) and, when the file
requires signatures, every unsigned entry from the seq it names on (``entry-unsigned``).
"""

from collections.abc import Callable
from typing import Final

import msgspec

from ledger.audit.report import Violation
from ledger.format.entries import Entry
from ledger.format.signing import TrustedSigners, key_name, signature_problem

SIGNATURE_INVALID: Final = "entry-signature-invalid"
SIGNER_UNKNOWN: Final = "entry-signer-unknown"
UNSIGNED: Final = "entry-unsigned"


class SignatureCheck:
    """An ``EntryObserver``: each well-formed entry's signature, and the trusted list's rules."""

    def __init__(self, trusted: TrustedSigners | None = None) -> None:
        self.trusted = trusted
        self.name = (
            "writer signatures"
            if trusted is None
            else f"writer signatures against {len(trusted.keys)} trusted keys"
        )

    def observe(self, entry: Entry, report: Callable[[Violation], None]) -> None:
        signature = entry.body.signature
        trusted = self.trusted
        if isinstance(signature, msgspec.UnsetType):
            if (
                trusted is not None
                and trusted.require_from is not None
                and entry.seq >= trusted.require_from
            ):
                report(
                    Violation(
                        entry.seq,
                        entry.kind,
                        UNSIGNED,
                        f"the entry is unsigned; the trusted-signers list requires every entry"
                        f" from seq {trusted.require_from} on to be signed",
                    )
                )
            return
        problem = signature_problem(entry.body_bytes, signature)
        if problem is not None:
            report(Violation(entry.seq, entry.kind, SIGNATURE_INVALID, problem))
        elif trusted is not None and signature.key not in trusted.keys:
            report(
                Violation(
                    entry.seq,
                    entry.kind,
                    SIGNER_UNKNOWN,
                    f"signed by {key_name(signature.key)} ({signature.key}), a key the"
                    " trusted-signers list does not name",
                )
            )

    def finish(self, report: Callable[[Violation], None]) -> None:
        """Nothing is left to check once every entry was seen."""
