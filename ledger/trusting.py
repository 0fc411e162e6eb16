"""Finding and reading the trust file, and the anchor rule it gives ``verify`` (LEDGER.md
section 7, "The trust file and the anchoring policy"): part of the library entry
(``ledger.api`` re-exports every name), kept in a module of its own so that a plain ``verify``
(``ledger.cli.fast``, issue 30) finds its trust file with the same code as every other command
without importing the whole library (the audit, the interop views, the proofs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.format.trust import TrustHow, TrustSource
from ledger.operations.verify import AnchorRule, recorded_anchor
from ledger.settings import Settings
from ledger.state import anchor_candidates

if TYPE_CHECKING:
    from ledger.format.trust import TrustFile
    from ledger.store.base import Store


@dataclass(frozen=True, slots=True)
class LoadedTrust:
    """A trust file as read (``load_trust``) and where it came from."""

    trust: TrustFile
    source: TrustSource


def trust_beside(db: str | os.PathLike[str]) -> Path | None:
    """Where the trust file of the SQLite ledger ``db`` is by convention (``ledger.db`` ->
    ``ledger.trust.json`` in the same folder); None for a PostgreSQL URL (it has no folder)."""
    from ledger.format.trust import FILE_SUFFIX
    from ledger.store.opening import postgres_url

    if postgres_url(str(db)) is not None:
        return None
    path = Path(db)
    return path.with_name(path.stem + FILE_SUFFIX)


def find_trust(
    option: str | os.PathLike[str] | None,
    settings: Settings,
    *,
    db: str | os.PathLike[str] | None = None,
) -> tuple[Path, TrustHow] | None:
    """The trust file a command uses, and how it was found: ``option`` (``--trust``), else
    ``settings.trust`` (``$LEDGER_TRUST``), else, only for a command that writes to ``db``
    (``db`` given), the file beside that ledger if there is one. A reading command never
    takes the file beside the ledger: whoever holds a ledger file can place one beside it
    (LEDGER.md section 7, SECURITY.md)."""
    if option is not None:
        return Path(option), "option"
    if settings.trust is not None:
        return Path(settings.trust), "environment"
    beside = trust_beside(db) if db is not None else None
    if beside is not None and os.path.lexists(beside):
        return beside, "beside-ledger"
    return None


def load_trust(path: str | os.PathLike[str], how: TrustHow = "option") -> LoadedTrust:
    """The trust file at ``path``, read bounded (``file-*`` codes) and checked whole
    (``trust-file-invalid``)."""
    from ledger.format.trust import MAX_TRUST_BYTES, parse_trust, trust_digest
    from ledger.operator_files import read_operator_file

    data = read_operator_file(Path(path), MAX_TRUST_BYTES, what="trust file")
    trust = parse_trust(data, str(path))
    return LoadedTrust(trust, TrustSource(str(path), how, trust_digest(data)))


def resolve_trust(
    option: str | os.PathLike[str] | None,
    settings: Settings,
    *,
    db: str | os.PathLike[str] | None = None,
) -> LoadedTrust | None:
    """The trust file a command uses (``find_trust``), read (``load_trust``); None: none."""
    found = find_trust(option, settings, db=db)
    return None if found is None else load_trust(*found)


def check_trust_origin(loaded: LoadedTrust, origin: str) -> None:
    """A trust file names one ledger: used with another it is ``trust-origin-mismatch``."""
    from ledger.format.trust import check_origin

    check_origin(loaded.trust, origin, loaded.source.file)


def anchor_rule(
    trust: TrustFile | None, *, unanchored: bool = False, source: TrustSource | None = None
) -> AnchorRule:
    """What ``verify`` asks of the anchor over a plan's freeze (operations rule 10): under the
    trust file's anchoring policy, an anchor meeting it, else ``plan-not-anchored`` (unless
    ``unanchored``); without a policy, nothing is required and a verdict with no anchor is
    recorded with a warning. ``source``: where the trust file came from, named in each
    result's ``trust``."""
    if trust is None or not trust.anchor.required:
        return AnchorRule(recorded_anchor, source=source)
    from ledger.transparency.anchoring import freeze_anchor, policy_trust

    policy = policy_trust(trust)

    def find(ledger: Store, freeze_seq: int) -> int | None:
        candidates = anchor_candidates(ledger, freeze_seq)
        found = freeze_anchor(ledger, freeze_seq, policy, candidates)
        return None if found is None else found.entry

    return AnchorRule(find, required=not unanchored, source=source)
