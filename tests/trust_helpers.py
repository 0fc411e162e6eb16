"""A calibrated ledger with its log key, built once per module and copied per test, and what the
trust file tests build on it: trust files, a witness of this log, cosigned checkpoints.

Kept free of pytest fixtures (the test modules own theirs).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import DEMO_BUNDLES_DIR, FIXED_TIME, REPO_DIR, CliResult, checkpointed_copy, run_cli
from witness_helpers import Log, Witness

from ledger.format.trust import TrustWitness, encode_trust, new_trust
from ledger.store.sqlite import SqliteStore

ORIGIN = "trust.example/ledger"
TASK = "demo/001-readme-marker"
COHORT = "example/demo"
BUNDLES = (
    DEMO_BUNDLES_DIR / "readme-marker" / "attempt-1",
    DEMO_BUNDLES_DIR / "readme-marker" / "attempt-2",
)


def build_base(folder: Path) -> Path:
    """A calibrated ledger (origin ``ORIGIN``) and its log key pair ``log.key``/``log.pub``."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "ledger.db"
    for args in (["init", "--origin", ORIGIN], ["calibrate"], ["keygen", "--out", "log"]):
        out = run_cli(["--db", str(db), *args], env={"LEDGER_TIME": FIXED_TIME}, cwd=folder)
        assert out.code == 0, out.stderr
    return folder


@dataclass
class World:
    """A copy of the base ledger in ``folder`` (``ledger.db``, ``log.key``, ``log.pub``)."""

    folder: Path

    @classmethod
    def copy_of(cls, base: Path, folder: Path) -> World:
        folder.mkdir(parents=True, exist_ok=True)
        checkpointed_copy(base / "ledger.db", folder / "ledger.db")
        for name in ("log.key", "log.pub"):
            shutil.copyfile(base / name, folder / name)
        return cls(folder)

    @property
    def db(self) -> Path:
        return self.folder / "ledger.db"

    @property
    def trust_path(self) -> Path:
        return self.folder / "ledger.trust.json"  # beside the ledger: what writers find

    def log_keys(self) -> tuple[str, str]:
        return (
            (self.folder / "log.key").read_text().strip(),
            (self.folder / "log.pub").read_text().strip(),
        )

    def cli(self, *args: str, env: dict[str, str | None] | None = None) -> CliResult:
        """``ledger --db THIS ARGS``, run from the repository (the demo cohort's paths)."""
        full = {"LEDGER_TIME": FIXED_TIME, "LEDGER_TRUST": None, **(env or {})}
        return run_cli(["--db", str(self.db), *args], env=full, cwd=REPO_DIR)

    def size(self) -> int:
        with SqliteStore.open_read_only(self.db) as ledger:
            return ledger.size()

    def witness(self, name: str = "w1") -> Witness:
        """A witness (its own key and state) that trusts this ledger's log key."""
        return Witness(self.folder / name, Log(ORIGIN, self.log_keys()), name=f"{name}.example/w")

    def write_trust(
        self,
        *,
        witnesses: tuple[tuple[str, str, str], ...] = (),
        anchor: tuple[int, int] = (0, 0),
        path: Path | None = None,
        origin: str = ORIGIN,
        tsas: tuple[Any, ...] = (),
    ) -> Path:
        """A trust file for this ledger (its log key), with ``witnesses`` (name, URL, key),
        ``tsas`` and the policy ``anchor`` (cosignatures, timestamps); beside the ledger by
        default."""
        import msgspec

        from ledger.format.trust import AnchorPolicy, check_trust

        base = new_trust(origin, self.log_keys()[1])
        trust = msgspec.structs.replace(
            base,
            witnesses=tuple(TrustWitness(name=n, url=u, key=k) for n, u, k in witnesses),
            tsas=tsas,
            anchor=AnchorPolicy(witnesses=anchor[0], timestamps=anchor[1]),
        )
        target = path or self.trust_path
        target.write_bytes(encode_trust(check_trust(trust, str(target))))
        return target

    def freeze(self, *extra: str) -> CliResult:
        return self.cli("freeze", "cohorts/demo", "--root", str(REPO_DIR), *extra, "--json")

    def verify(self, bundle: Path = BUNDLES[0], *extra: str) -> CliResult:
        return self.cli("verify", str(bundle), *extra, "--json")


def frozen_entry(result: CliResult) -> int:
    doc: dict[str, Any] = json.loads(result.stdout)
    return int(doc["frozen_entry"])
