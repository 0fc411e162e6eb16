"""One root error for everything the ledger refuses.

Every refusal carries a stable ``code`` (kebab-case, listed in LEDGER.md "Error codes"), a one-line
human ``message`` that says what was wrong and how to mend it, and the process ``exit_code``.
The library raises; only ``ledger.cli.commands`` catches (once) and renders. The library never
prints. A ``verifiers.errors.VerifierError`` becomes a ``LedgerError`` at one place,
``from_verifier``: no verifier exception crosses the ledger's API.
"""

from __future__ import annotations

from typing import Final, TypeVar

import msgspec

from verifiers.errors import VerifierError

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1  # a reject, or violations found
EXIT_REFUSED: Final = 2  # refused; nothing was written


class LedgerError(Exception):
    """Root of every error the ledger raises on purpose."""

    def __init__(self, code: str, message: str, *, exit_code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ErrorDetail(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A refusal as data: its code (LEDGER.md section 11) and one-line message."""

    code: str
    message: str

    @classmethod
    def of(cls, exc: LedgerError) -> ErrorDetail:
        return cls(code=exc.code, message=exc.message)


class ErrorDocument(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a refused command prints with ``--json`` (``schemas/output-error-v1``)."""

    error: ErrorDetail


class UsageError(LedgerError):
    """Bad arguments or an unusable input path given by the operator."""


class StoreError(LedgerError):
    """The ledger file is missing, unreadable, not a ledger, or of another format version."""


class CommitError(LedgerError):
    """A commitment rule refused the operation (freeze, verify, burn, calibrate)."""


_E = TypeVar("_E", bound=LedgerError)


def from_verifier(
    exc: VerifierError,
    kind: type[_E],
    *,
    code: str | None = None,
    context: str = "",
    message: str | None = None,
) -> _E:
    """The ledger refusal of ``kind`` that stands for ``exc``: its code (or ``code`` where the
    ledger names the refusal itself) and ``context`` followed by its detail (or by ``message``
    where the ledger words it itself). Raise it ``from None``: the code and message say it all."""
    detail = exc.detail if message is None else message
    return kind(exc.code if code is None else code, f"{context}{detail}")
