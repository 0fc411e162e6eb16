"""The one error root of the ``verifiers`` package.

Every exception a verifier module raises on purpose is a ``VerifierError`` carrying a stable
``code`` (kebab-case) and a one-line ``message``; ``str()`` of one reads ``code: message`` unless
the subclass says otherwise. Candidate input never raises one: a malformed candidate is a recorded
reject with findings. What does raise is operator-side (an unusable bundle folder, a plan that
does not bind), a stored record that no longer replays, a value with no canonical form, or a
broken invariant of this package. ``ledger`` turns each into its own error root at one place
(``ledger.errors.from_verifier``). Private control-flow exceptions (``diff._Abort``) never escape
the function that raises them.

This module imports nothing: every other verifier module may import it.
"""

from __future__ import annotations


class VerifierError(Exception):
    """Root of every error the verifiers raise on purpose: a stable ``code`` and a ``message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def detail(self) -> str:
        """The message as a refusal that wraps this error quotes it (``message`` unless the
        subclass knows a location that belongs in front of it)."""
        return self.message


class VerifierInternalError(VerifierError):
    """A broken invariant of this package (never caused by candidate input); ``str()`` is the
    message alone, as the CLI's internal-error line quotes it."""

    def __init__(self, message: str) -> None:
        super().__init__("verifier-internal", message)

    def __str__(self) -> str:
        return self.message


__all__ = ["VerifierError", "VerifierInternalError"]
