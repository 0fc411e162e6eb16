"""The sandbox as the edge hands it to ``freeze`` and ``verify`` (LEDGER.md section 10,
"Runs and the result"): opened on first use, so a freeze or verify of static plans never needs
``bwrap``, and imported only here, lazily, so no other part of the ledger depends on it."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from ledger.errors import LedgerError
from verifiers.observations import Environment, Executor, Limits, RunObservation

SANDBOX_MODULE = "ledger.sandbox.bwrap"


class SandboxExecutor:
    """An ``Executor`` that opens the sandbox (``open_executor(bwrap)``) at its first run; its
    refusal (``sandbox-unavailable``) is raised from that run, before anything executes."""

    def __init__(self, bwrap: Path | None = None, *, module: str = SANDBOX_MODULE) -> None:
        self._bwrap = bwrap
        self.module = module
        self._opened: Executor | None = None

    def configuration(self) -> Mapping[str, object]:
        """The opened sandbox's configuration (empty before the first run)."""
        return {} if self._opened is None else self._opened.configuration()

    def run(
        self,
        tree: Path,
        command: Sequence[str],
        test_ids: Sequence[str],
        limits: Limits,
        environment: Environment,
    ) -> RunObservation:
        if self._opened is None:
            # By name: the sandbox is its own part, and only this edge module reaches it.
            try:
                module = importlib.import_module(self.module)
            except ModuleNotFoundError as exc:
                if exc.name is None or not self.module.startswith(exc.name):
                    raise
                raise LedgerError(
                    "sandbox-unavailable",
                    f"this installation has no sandbox ({self.module}): nothing was run",
                ) from None
            self._opened = module.open_executor(self._bwrap)
        return self._opened.run(tree, command, test_ids, limits, environment)


def sandbox_executor() -> SandboxExecutor:
    """What the CLI and ``ledger.api`` give ``freeze`` and ``verify``."""
    return SandboxExecutor()


__all__ = ["SANDBOX_MODULE", "SandboxExecutor", "sandbox_executor"]
