"""The library's face for harnesses (docs/API.md says what is stable): the operations behind
every command, each returning one typed result, the type the command prints with ``--json``
(its ``schemas/output-*`` file is generated from it); refusals raise ``LedgerError``
subclasses with the codes of LEDGER.md section 11. None prints, exits or reads the
environment; ``ledger.cli`` only parses arguments, renders, and maps a result to its exit code.

    from ledger import api
    with api.open_ledger("ledger.db") as ledger:
        api.calibrate(ledger)
        api.freeze(ledger, "cohorts/demo", root=".")
        result = api.verify(ledger, "fixtures/demo/bundles/readme-marker/attempt-1")
        report = api.audit(ledger)

Settings (a fixed entry time, the busy timeout, the audit's parallel mode) are arguments: a
``Settings`` (``ledger.settings``), whose defaults read nothing (the wall clock, 30 s, ``auto``).
The environment is read only when a caller asks for it, as the CLI does:

    settings = api.settings_from_environ()  # LEDGER_TIME, LEDGER_BUSY_TIMEOUT_MS, ...
    with api.open_ledger("ledger.db", settings=settings) as ledger:
        report = api.audit(ledger, parallel=settings.parallel)

``docs/harness_example.py`` does the whole job through this module.
"""

from __future__ import annotations

import base64
import os
import secrets
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ledger.audit.engine import audit as _run_audit
from ledger.audit.engine import audit_snapshot
from ledger.audit.report import AuditReport, AuditResult, Skipped, Verdict, Violation
from ledger.audit.rules import CommitmentRules
from ledger.audit.signatures import SignatureCheck
from ledger.errors import (
    CommitError,
    ErrorDetail,
    ErrorDocument,
    LedgerError,
    StoreError,
    UsageError,
)
from ledger.format.entries import Entry, EntryBody, EntrySigner
from ledger.format.trust import TrustFile, TrustSource
from ledger.interop.attest import AttestationCheck, attestations, check_attestation
from ledger.operations.batch import BatchRefused, BatchRun, BatchVerified, batch_line
from ledger.operations.batch import verify_many as _verify_many
from ledger.operations.burn import BurnPlan, BurnResult, BurnTask, burn, plan_burn
from ledger.operations.calibrate import (
    CalibrateResult,
    CalibrationReport,
    CalibrationRow,
    calibrate,
)
from ledger.operations.check_result import ResultCheck
from ledger.operations.check_result import check_result as _check_result
from ledger.operations.freeze import FreezeResult
from ledger.operations.freeze import freeze as _freeze
from ledger.operations.verify import AnchorRule, VerifyResult
from ledger.operations.verify import verify as _verify
from ledger.operator_files import read_operator_text
from ledger.settings import Settings
from ledger.state import (
    CohortStatus,
    EarlierVerification,
    StateIndex,
    StatusResult,
    StatusWorkUnit,
    TaskStatus,
    anchor_candidates,
    candidate_of,
    ledger_status,
)
from ledger.store.base import AccessRoles, Store, StoredObject
from ledger.store.copy import CopyResult, copy_store
from ledger.store.lookup import CandidateIdentity, find_ref, verification_result
from ledger.store.opening import create_store, open_store
from ledger.tlog.notes import Checkpoint
from ledger.transparency.anchors import Trust, WhenStatement, trust_from
from ledger.transparency.anchors import when as _when
from ledger.transparency.check import ProofCheck, ProofInputError
from ledger.transparency.check import check_proof as _check_proof
from ledger.transparency.export import export, hidden_task_objects, open_export
from ledger.transparency.proofs import (
    CheckpointNote,
    ConsistencyProof,
    InclusionProof,
    TlogInclusionProof,
    check_origin,
    checkpoint,
    checkpoint_note,
    prove_consistency,
    prove_inclusion,
)
from ledger.transparency.witnessing import (
    TsaReply,
    WitnessedCheckpoint,
    WitnessReply,
    WitnessTarget,
    witness_checkpoint,
)

# The trust file (found, read, its anchor rule): a module of its own, re-exported here, so a
# plain verify finds it with the same code without importing this module.
from ledger.trusting import LoadedTrust, check_trust_origin, find_trust, load_trust, trust_beside
from ledger.trusting import anchor_rule as _anchor_rule
from verifiers.contracts import OUTCOMES, Outcome, VerificationResult
from verifiers.contracts.common import ContractStruct, refuse
from verifiers.observations import Executor

if TYPE_CHECKING:
    from ledger.format.signing import TrustedSigners, WriterKey
    from ledger.format.trust import KeyKind
    from ledger.interop.browse import BrowseResult

EXPORT_HEADER_MISMATCH = "export-header-mismatch"


class LedgerRoles(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A PostgreSQL ledger's roles (LEDGER.md section 2, "Roles and privileges")."""

    writer: str  # the group role a writing command's login is a member of
    reader: str  # the group role a reading command's login is a member of
    logins_sql: list[str]  # CREATE ROLE ... LOGIN / GRANT ... TO ... for two example logins

    @classmethod
    def of(cls, roles: AccessRoles) -> LedgerRoles:
        return cls(writer=roles.writer, reader=roles.reader, logins_sql=roles.login_statements())


class InitResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``init_ledger`` did, and what ``ledger init --json`` prints
    (``schemas/output-init-v1``): ``db`` the ledger as messages name it (a PostgreSQL URL
    with its password masked), ``created`` false when it existed (nothing changed)."""

    db: str
    created: bool
    origin: str
    # PostgreSQL: the ledger's writer and reader roles, which its logins are made members of
    # (LEDGER.md section 2); None for a SQLite file.
    roles: LedgerRoles | None


def default_origin() -> str:
    """A fresh origin line. Random, so two ledgers never share one; recorded in entry 0."""
    return f"evidence-ledger/{secrets.token_hex(8)}"


def settings_from_environ() -> Settings:
    """The settings of this process's environment, as the CLI reads them (LEDGER.md section 2,
    "Settings"): ``LEDGER_TIME``, ``LEDGER_BUSY_TIMEOUT_MS``, ``LEDGER_AUDIT_PARALLEL``. A
    malformed value raises ``UsageError`` (``bad-time``, ``bad-busy-timeout``,
    ``bad-audit-parallel``). Nothing else in the library reads the environment."""
    return Settings.from_environ(os.environ)


MAX_KEY_FILE_BYTES = 64 * 1024


def load_signer(path: str | os.PathLike[str]) -> WriterKey:
    """The writer key in the file ``path`` (the ``.key`` file ``ledger keygen`` writes), to
    pass as ``signer=``: every entry then appended is signed (format 2, LEDGER.md section 3).
    A file that is not one private note key is ``bad-signer``."""
    from ledger.format.signing import load_writer_key

    return load_writer_key(
        read_operator_text(Path(path), MAX_KEY_FILE_BYTES, what="signer key"), str(path)
    )


def load_trusted_signers(path: str | os.PathLike[str]) -> TrustedSigners:
    """The trusted-signers file ``path`` (LEDGER.md section 6, "Writer signatures"), for the
    audit's ``signers=``; a malformed one is ``bad-signers``."""
    from ledger.format.signing import MAX_SIGNERS_BYTES, parse_trusted_signers

    text = read_operator_text(Path(path), MAX_SIGNERS_BYTES, what="trusted-signers file")
    return parse_trusted_signers(text, str(path))


def load_key(value: str, kind: KeyKind) -> str:
    """The one parser of a key argument, for every command and the library (LEDGER.md section
    7, "The trust file and the anchoring policy"): ``value`` is the key string itself, or the
    path of a file holding it (``ledger keygen``'s or ``witness keygen``'s ``.pub``). A value
    that parses as a key of ``kind`` (``"log"``, ``"writer"``: a note verifier key;
    ``"witness"``: a cosigner key) is that key; any other names a file, read bounded as every
    operator file, whose content must be one. Neither: the kind's code
    (``checkpoint-key-malformed``, ``witness-key-malformed``), naming both readings."""
    from ledger.format.trust import KEY_WORDS, parse_key

    try:
        return parse_key(value.strip(), kind)
    except LedgerError as exc:
        first = exc
    if not os.path.lexists(value):
        raise LedgerError(
            first.code, f"{value!r} is neither a {KEY_WORDS[kind]} nor a file ({first.message})"
        )
    text = read_operator_text(Path(value), MAX_KEY_FILE_BYTES, what="key")
    try:
        return parse_key(text.strip(), kind)
    except LedgerError as exc:
        raise LedgerError(exc.code, f"key file {value}: {exc.message}") from None


def _anchor_freeze(
    ledger: Store, frozen_entry: int, trust: TrustFile, signer_key: str, frozen: str = ""
) -> tuple[int | None, WitnessedCheckpoint | None]:
    """The entry that anchors the freeze at ``frozen_entry`` as ``trust``'s policy asks: one
    already recorded, else a checkpoint signed with ``signer_key`` and anchored now by the
    file's witnesses and TSAs (returned too). When they do not give it: ``anchoring-failed``
    (exit 1; the freeze stays, nothing else is written). ``frozen``: the freeze in words."""
    from ledger.transparency.anchoring import anchor_freeze as run

    frozen = frozen or f"entry {frozen_entry}"
    return run(ledger, frozen_entry, trust, signer_key, frozen, anchor_candidates)


def freeze(
    ledger: Store,
    cohort_dir: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] = ".",
    hidden_plans: str | os.PathLike[str] | None = None,
    reuse_exposed: Mapping[str, str] | None = None,
    trust: LoadedTrust | None = None,
    signer_key: str | None = None,
    unanchored: bool = False,
    progress: Callable[[int, int], None] | None = None,
    executor: Callable[[], Executor] | None = None,
) -> FreezeResult:
    """What ``ledger freeze COHORT_DIR`` runs (LEDGER.md section 5): freeze
    ``cohort_dir/cohort.json`` and what it names (paths relative to ``root``; hidden plans from
    ``hidden_plans``; ``reuse_exposed``: task id -> why it reuses an exposed task's content),
    then, under ``trust``'s anchoring policy (unless ``unanchored``), anchor the freeze with a
    checkpoint signed by ``signer_key`` (the log's private note key) that the file's witnesses
    and TSAs answer for. Without a policy, an anchor already recorded is named, if any.

    A trust file of another ledger is ``trust-origin-mismatch``, a policy without
    ``signer_key`` is ``anchor-key-missing`` and a ``signer_key`` with no policy (or with
    ``unanchored``) ``usage-error``, all before anything is written; witnesses and
    TSAs that do not give the anchor are ``anchoring-failed`` (the freeze stays recorded)."""
    policy = trust.trust if trust is not None and trust.trust.anchor.required else None
    if policy is not None and not unanchored:
        from ledger.transparency.anchoring import anchor_signer

        signer_key = anchor_signer(signer_key, policy, trust.source.file if trust else "")
    elif signer_key is not None:
        from ledger.transparency.anchoring import refuse_idle_signer

        refuse_idle_signer(has_policy=policy is not None, unanchored=unanchored)
    if trust is not None:
        check_trust_origin(trust, ledger.origin())
    result = _freeze(
        ledger,
        Path(cohort_dir),
        root=Path(root),
        hidden_plans=None if hidden_plans is None else Path(hidden_plans),
        reuse_exposed=reuse_exposed,
        progress=progress,
        executor=executor,
    )
    warning = None
    if policy is None or signer_key is None:
        from ledger.operations.verify import recorded_anchor

        anchored_by = recorded_anchor(ledger, result.frozen_entry)
    elif result.burned_entry is not None:
        anchored_by = None  # a burned cohort accepts no verification: nothing to order
    else:
        anchored_by, _ = _anchor_freeze(
            ledger, result.frozen_entry, policy, signer_key, result.message
        )
    if anchored_by is None and result.burned_entry is None:
        warning = _freeze_warning(result, unanchored=policy is not None)
    return msgspec.structs.replace(
        result,
        anchored_by=anchored_by,
        warning=warning,
        trust=None if trust is None else trust.source,
    )


def _freeze_warning(result: FreezeResult, *, unanchored: bool) -> str:
    from ledger.operations.verify import ANCHOR_FIX

    why = (
        "--unanchored was given"
        if unanchored
        else "there is no anchoring policy (no trust file, or one without `ledger trust anchor`)"
    )
    return (
        f"cohort {result.cohort} is frozen at seq {result.frozen_entry} but not anchored:"
        f" {why}. Take an anchored checkpoint before its first verify (`{ANCHOR_FIX}`), or"
        " `ledger when` can never hold for its verdicts"
    )


def _signer_of(settings: Settings, signer: EntrySigner | None) -> EntrySigner | None:
    if signer is not None:
        return signer
    return load_signer(settings.signer) if settings.signer is not None else None


def init_ledger(
    path: str | os.PathLike[str],
    *,
    origin: str | None = None,
    settings: Settings | None = None,
    signer: EntrySigner | None = None,
) -> InitResult:
    """Create a ledger at ``path`` (idempotent: an existing ledger is left unchanged).

    ``signer`` (else the key file ``settings.signer`` names, if any) signs the genesis entry."""
    settings = settings or Settings()
    ledger, created = create_store(
        path,
        origin=origin or default_origin(),
        clock=settings.clock,
        busy_timeout_ms=settings.busy_timeout_ms,
        signer=_signer_of(settings, signer),
    )
    from ledger.store.opening import display_name

    with ledger:
        roles = ledger.access_roles
        return InitResult(
            db=display_name(path),
            created=created,
            origin=ledger.origin(),
            roles=None if roles is None else LedgerRoles.of(roles),
        )


def open_ledger(
    path: str | os.PathLike[str],
    *,
    read_only: bool = False,
    settings: Settings | None = None,
    signer: EntrySigner | None = None,
) -> Store:
    """Open an existing ledger (``StoreError`` when it is missing or not a ledger).

    ``read_only`` opens it as every reading command does: nothing is written, in the file or
    beside it, and it works on read-only media (LEDGER.md section 2); writing then refuses
    with ``ledger-read-only``. ``settings`` gives the clock and the busy timeout (default:
    the wall clock, 30 s; never the environment: see ``settings_from_environ``). ``signer``
    (``load_signer``; else the key file ``settings.signer`` names, if any) signs every entry
    appended through the ledger; a read-only open loads no key."""
    settings = settings or Settings()
    return open_store(
        path,
        read_only=read_only,
        clock=settings.clock,
        busy_timeout_ms=settings.busy_timeout_ms,
        signer=None if read_only else _signer_of(settings, signer),
    )


def read_log(
    ledger: Store,
    *,
    kinds: Sequence[str] = (),
    since: int = 0,
    tail: int | None = None,
    limit: int | None = None,
) -> Iterator[Entry]:
    """What ``ledger log`` reads (LEDGER.md section 2, "Reading entries"): the entries of
    ``kinds`` (each value a kind or a comma list; an unknown one is ``bad-kind``) from seq
    ``since`` on, of those the last ``tail``, of those the first ``limit``, in seq order.

    A generator over the store's cursors (constant memory); the arguments are checked at the
    call, before anything is read."""
    return ledger.select_entries(kinds=kinds, since=since, tail=tail, limit=limit)


def copy_ledger(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    settings: Settings | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CopyResult:
    """What ``ledger copy SRC DST`` runs (LEDGER.md section 2, "Copying a ledger"): the source
    opened read-only and checked whole, then copied entry by entry, byte for byte, into the new
    store ``dst`` (a path that does not exist, or an empty PostgreSQL database), with its
    derived state rebuilt on the way; its root equals the source's."""
    settings = settings or Settings()
    with open_store(src, read_only=True, busy_timeout_ms=settings.busy_timeout_ms) as source:
        return copy_store(
            source,
            dst,
            on_writer=StateIndex.for_writer,
            clock=settings.clock,
            busy_timeout_ms=settings.busy_timeout_ms,
            progress=progress,
        )


def _readable_origin(ledger: Store) -> str | None:
    """The ledger's origin, or None when its genesis fails the checked read (``entry-corrupt``,
    ``entry-malformed``): an audit then reports the genesis at seq 0 against the checkpoint or
    trust file it was given, rather than refuse to run."""
    try:
        return ledger.origin()
    except StoreError as exc:
        if exc.code in ("entry-corrupt", "entry-malformed"):
            return None
        raise


def audit_ledger(
    ledger: Store,
    *,
    replay: bool = True,
    checkpoints: Sequence[Checkpoint] = (),
    withheld: Mapping[str, tuple[str, int]] | None = None,
    progress: Callable[[int, int], None] | None = None,
    parallel: bool | None = None,
    signers: TrustedSigners | None = None,
) -> tuple[AuditReport, int]:
    """What ``ledger audit`` runs: every check of LEDGER.md section 6, the commitment rules and
    (unless ``replay`` is off) every replay. Returns the report and the number of replays.
    Every format-2 entry's signature is checked; ``signers`` (``load_trusted_signers``) also
    reports keys it does not list and, if it requires signatures, unsigned entries.
    ``parallel`` (``Settings.parallel``): the row checks in a second process and the replays
    in worker processes (True), not (False), or as the ledger's size and the CPUs decide
    (None); the report is the same.

    A checkpoint of another origin is refused (``checkpoint-origin-mismatch``). ``withheld``
    maps objects known to exist whose bytes are absent to the ``(sha256, size)`` listed for
    them (``audit_export`` decides which); every check skipped for want of bytes, or because
    ``replay`` is off, is counted in ``report.skipped`` and makes the verdict
    ``intact-with-skips``. ``progress(done, total)``, when given, is told the entries audited
    so far (every few hundred, and after the last): what the CLI draws its bar from."""
    if checkpoints and _readable_origin(ledger) is not None:
        for cp in checkpoints:
            check_origin(ledger, cp)
    withheld = withheld or {}
    rules = CommitmentRules(ledger, replay=replay, withheld=withheld, parallel=parallel)
    try:
        report = _run_audit(
            ledger,
            observers=[rules, SignatureCheck(signers)],
            checkpoints=checkpoints,
            withheld=withheld,
            progress=progress,
            parallel=parallel,
        )
    finally:
        rules.close()
    report.replayed = rules.replayed
    report.withheld = len(withheld)
    report.anchored_size = max((cp.size for cp in checkpoints), default=0)
    report.skipped = [
        Skipped(check=check, count=count, reason=reason)
        for (check, reason), count in sorted(rules.skipped.items())
    ]
    return report, rules.replayed


def audit_export(
    path: str | os.PathLike[str],
    *,
    replay: bool = True,
    checkpoints: Sequence[Checkpoint] = (),
    progress: Callable[[int, int], None] | None = None,
    parallel: bool | None = None,
    signers: TrustedSigners | None = None,
    trust: TrustFile | None = None,
) -> tuple[AuditReport, int]:
    """What ``ledger audit --from-export`` runs (LEDGER.md section 7, "Audit modes"): the export
    is read as untrusted input (``export-unreadable`` / ``export-malformed``), loaded into a
    private in-memory ledger and audited like a file, with the export policy on top:

    - an object may be withheld iff a hidden-task reference names it
      (``transparency.hidden_task_objects``); any other withheld object is ``object-missing``;
    - a withheld object's listed sha256 and size must be what its references commit
      (``object-sha256-mismatch``);
    - the header's ``tree_size`` and ``root_hash`` must be what the entries give
      (``export-header-mismatch``).

    ``trust``: the reader's trust file; an export of another ledger than it names is
    ``trust-origin-mismatch``.
    """
    exported = open_export(Path(path))
    with exported:
        if trust is not None:
            from ledger.format.trust import check_origin

            origin = _readable_origin(exported)
            if origin is not None:  # else the audit reports the genesis at seq 0
                check_origin(trust, origin, "given")
        allowed = hidden_task_objects(exported, audited=True) if exported.withheld else set()
        withheld = {d: v for d, v in exported.withheld.items() if d in allowed}
        report, replayed = audit_ledger(
            exported,
            replay=replay,
            checkpoints=checkpoints,
            withheld=withheld,
            progress=progress,
            parallel=parallel,
            signers=signers,
        )
    size, root = exported.header_size, exported.header_root
    if (size, root) != (report.tree_size, report.root_hash):
        report.violations.append(
            Violation(
                None if size == report.tree_size else min(size, report.tree_size),
                None,
                EXPORT_HEADER_MISMATCH,
                f"the export's header claims {size} entries and root"
                f" {base64.b64encode(root).decode()}; its entries give"
                f" {report.tree_size} and {base64.b64encode(report.root_hash).decode()}",
            )
        )
        report.violation_count += 1
    return report, replayed


def verify(
    ledger: Store,
    bundle: str | os.PathLike[str],
    *,
    cohort: str | None = None,
    task: str | None = None,
    trust: LoadedTrust | None = None,
    unanchored: bool = False,
    executor: Executor | None = None,
) -> VerifyResult:
    """What ``ledger verify BUNDLE`` runs and prints (LEDGER.md section 5): judge the bundle
    folder by the plan this ledger committed for its task (``cohort``/``task`` choose when
    several could) and record the bundle and the result together. ``outcome`` is the verdict
    (``support``, ``reject``, ``escalate``, ``insufficient_evidence``); ``verification_result``
    the typed VerificationResult. Under ``trust``'s anchoring policy a plan whose freeze is not
    anchored is ``plan-not-anchored`` (unless ``unanchored``); without a policy the result
    carries a ``warning``. A bundle refused is a ``LedgerError`` and nothing is written.
    ``executor``: the sandbox a v0.5 plan's tests run in (``ledger.sandboxing.sandbox_executor()``);
    without it a v0.5 bundle is ``sandbox-unavailable`` and nothing is written."""
    if trust is not None:
        check_trust_origin(trust, ledger.origin())
    return _verify(
        ledger,
        Path(bundle),
        cohort=cohort,
        task=task,
        anchors=_rule(trust, unanchored),
        executor=executor,
    )


def verify_many(
    ledger: Store,
    bundles: Iterable[str | os.PathLike[str]],
    *,
    jobs: int | None = None,
    cohort: str | None = None,
    task: str | None = None,
    trust: LoadedTrust | None = None,
    unanchored: bool = False,
    executor: Callable[[], Executor] | None = None,
) -> BatchRun:
    """What ``ledger verify B1 B2 ...`` runs: each bundle verified as ``verify`` would, judged
    in ``jobs`` worker processes and recorded here in order; iterate for each bundle's
    ``VerifyResult`` or its refusal (a ``LedgerError``, the batch goes on), in bundle order
    (``batch_line(item, bundle)`` gives the line ``--json`` prints). ``close()`` stops early;
    every pair appended stays whole. ``executor``: what makes the sandbox a v0.5 plan's tests
    run in, in this process and in each worker (``ledger.sandboxing.sandbox_executor``)."""
    if trust is not None:
        check_trust_origin(trust, ledger.origin())
    paths = [Path(b) for b in bundles]
    rule = _rule(trust, unanchored)
    return _verify_many(
        ledger, paths, jobs=jobs, cohort=cohort, task=task, anchors=rule, executor=executor
    )


def _rule(trust: LoadedTrust | None, unanchored: bool) -> AnchorRule:
    if trust is None:
        return _anchor_rule(None, unanchored=unanchored)
    return _anchor_rule(trust.trust, unanchored=unanchored, source=trust.source)


def _writers_of(trust: LoadedTrust | None) -> TrustedSigners | None:
    """The trust file's writers as ``load_trusted_signers`` would give them (None: none)."""
    if trust is None or not trust.trust.writers:
        return None
    from ledger.format.signing import TrustedSigners

    return TrustedSigners(frozenset(trust.trust.writers), trust.trust.require_signed_from)


def audit(
    ledger: Store,
    *,
    replay: bool = True,
    checkpoints: Sequence[Checkpoint] = (),
    signers: TrustedSigners | None = None,
    trust: LoadedTrust | None = None,
    parallel: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> AuditResult:
    """What ``ledger audit`` runs and prints (``audit_ledger``'s checks): the result a reader
    takes, ``ok`` and ``verdict`` first. ``trust``: a trust file of this ledger (else
    ``trust-origin-mismatch``) whose writers stand for ``signers`` when none are given."""
    if trust is not None:
        check_trust_origin(trust, ledger.origin())
    report, _ = audit_ledger(
        ledger,
        replay=replay,
        checkpoints=checkpoints,
        progress=progress,
        parallel=parallel,
        signers=signers if signers is not None else _writers_of(trust),
    )
    return report.result(None if trust is None else trust.source)


def audit_of_export(
    path: str | os.PathLike[str],
    *,
    replay: bool = True,
    checkpoints: Sequence[Checkpoint] = (),
    signers: TrustedSigners | None = None,
    trust: LoadedTrust | None = None,
    parallel: bool | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> AuditResult:
    """What ``ledger audit --from-export FILE`` runs and prints (``audit_export``'s checks and
    export policy) as ``audit`` gives it."""
    report, _ = audit_export(
        path,
        replay=replay,
        checkpoints=checkpoints,
        progress=progress,
        parallel=parallel,
        signers=signers if signers is not None else _writers_of(trust),
        trust=None if trust is None else trust.trust,
    )
    return report.result(None if trust is None else trust.source)


def status(ledger: Store, cohort: str | None = None) -> StatusResult:
    """What ``ledger status [COHORT]`` shows and ``--json`` prints: each frozen cohort (or only
    ``cohort``; ``cohort-not-frozen`` if it is not) with its stage, tasks and outcomes per
    task, in freeze order."""
    return ledger_status(ledger, cohort)


# ``show REF --json`` of an entry of any kind but verification.recorded (output-show).
class ShowEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seq: int
    # Any kind as stored (an unknown one is the audit's to report) but the one shown with its
    # result: a verification never prints this shape.
    kind: Annotated[str, Meta(extra_json_schema={"not": {"const": "verification.recorded"}})]
    entry_hash: str
    body: EntryBody
    # Only for a bundle.observed entry: whose it is, and the first verification of the same
    # bytes when it is an earlier one (null: none found).
    candidate: CandidateIdentity | UnsetType = UNSET
    same_bytes_as: EarlierVerification | UnsetType | None = UNSET


# ``show REF --json`` of a verification.recorded entry (output-show-verification).
class ShowVerification(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seq: int
    kind: Literal["verification.recorded"]
    entry_hash: str
    body: EntryBody
    # The stored result object decoded, or null when it is missing or does not read as a
    # VerificationResult (the audit says why).
    result: VerificationResult | None
    # Whose bundle it judged (read from its bundle.observed entry), and the first verification
    # of the same bytes when it is an earlier one (null: none found).
    # (Both absent when the verification names no bundle.observed entry: a ledger written
    # around verify, which the audit reports.)
    candidate: CandidateIdentity | UnsetType = UNSET
    same_bytes_as: EarlierVerification | UnsetType | None = UNSET


# ``show ADDRESS --json`` of a stored object: exactly one of document and body_base64
# (output-show-object).
class ShowObject(ContractStruct, frozen=True, kw_only=True):
    json_schema_extra: ClassVar[dict[str, Any]] = {
        "oneOf": [{"required": ["document"]}, {"required": ["body_base64"]}]
    }

    digest: str  # blake3:<64 hex>, the object's address
    sha256: str
    media_type: str  # as stored (the ledger writes application/json or application/octet-stream)
    size: int
    # Any JSON value: a stored application/json object holds whatever document was committed
    # (a WorkUnit, a plan, a result, a bundle's JSON file), so its content is genuinely open.
    document: Any | UnsetType = UNSET
    body_base64: str | UnsetType = UNSET  # the exact bytes, when they are not readable JSON

    def check_rules(self) -> None:
        if isinstance(self.document, UnsetType) == isinstance(self.body_base64, UnsetType):
            raise refuse("", "exactly one of document and body_base64")


def show(ledger: Store, ref: str) -> ShowEntry | ShowVerification | ShowObject:
    """What ``ledger show REF --json`` prints (``find_ref`` names what ``ref`` may be): an
    entry with its decoded body (a verification with its VerificationResult; a bundle or a
    verification with whose the bundle is and the first verification of the same bytes), or
    a stored object with its JSON document or, when it is not one, its exact bytes. In one
    read snapshot."""
    from ledger.state import Mentions

    with ledger.snapshot():
        found = find_ref(ledger, ref, lambda prefix, n: Mentions(ledger).digests(prefix, n))
        return _shown(ledger, found)


def _shown(ledger: Store, found: Entry | StoredObject) -> ShowEntry | ShowVerification | ShowObject:
    """``show``'s result for an entry or object ``find_ref`` found."""
    if isinstance(found, StoredObject):
        return _object_shown(found)
    whose = candidate_of(ledger, found)
    body = found.body  # as the store decodes it; a body decoded typed is decoded again
    if not isinstance(body, EntryBody):
        body = msgspec.json.decode(found.body_bytes, type=EntryBody)
    candidate = UNSET if whose is None else whose[0]
    same_bytes_as = UNSET if whose is None else whose[1]
    if found.kind == "verification.recorded":
        return ShowVerification(
            seq=found.seq,
            kind="verification.recorded",
            entry_hash=found.entry_hash,
            body=body,
            result=_typed_result(verification_result(ledger, found)),
            candidate=candidate,
            same_bytes_as=same_bytes_as,
        )
    return ShowEntry(
        seq=found.seq,
        kind=found.kind,
        entry_hash=found.entry_hash,
        body=body,
        candidate=candidate,
        same_bytes_as=same_bytes_as,
    )


def _typed_result(decoded: dict[str, object] | None) -> VerificationResult | None:
    """The stored result as its contract, or None when it is not one (the audit says why)."""
    if decoded is None:
        return None
    try:
        return msgspec.convert(decoded, VerificationResult)
    except msgspec.ValidationError:
        return None


def _object_shown(obj: StoredObject) -> ShowObject:
    """A stored object as ``show --json`` gives it: its JSON document when it is a readable
    JSON object, else its exact bytes in base64."""
    document: Any = None
    if obj.media_type == "application/json":
        from verifiers.jsonread import read_json

        # Strict and depth-bounded: a stored object is untrusted bytes (a deep one would
        # crash json.loads); what does not read is shown as its bytes instead. Only an object
        # is a document: a stored array or scalar is shown as its bytes, so a script never
        # mistakes one for a document.
        read = read_json(obj.body, max_bytes=len(obj.body), max_depth=256)
        document = read.value if read.ok and isinstance(read.value, dict) else None
    if document is not None:
        return ShowObject(
            digest=obj.digest, sha256=obj.sha256, media_type=obj.media_type, size=obj.size,
            document=document,
        )  # fmt: skip
    return ShowObject(
        digest=obj.digest, sha256=obj.sha256, media_type=obj.media_type, size=obj.size,
        body_base64=base64.b64encode(obj.body).decode("ascii"),
    )  # fmt: skip


def browse(
    ledger: Store, out: str | os.PathLike[str], *, public: bool = False, force: bool = False
) -> BrowseResult:
    """What ``ledger browse`` runs (LEDGER.md section 15): write the Datasette database ``out``
    and its ``<stem>.metadata.json`` from ``ledger`` (opened read-only is enough). ``public``
    withholds what ``export --public`` withholds; an existing output is refused
    (``file-exists``) unless ``force``. (sqlite-utils is imported here, on use: it costs every
    other command ~0.2 s of start-up.)"""
    from ledger.interop.browse import build_browse

    return build_browse(ledger, Path(out), public=public, force=force)


def report_html(
    ledger: Store,
    *,
    public: bool = False,
    cohort: str | None = None,
    parallel: bool | None = None,
    checkpoints: Sequence[Checkpoint] = (),
) -> tuple[str, AuditReport]:
    """What ``ledger report --html`` writes (LEDGER.md section 15): the audit of ``ledger``
    (against the kept ``checkpoints``, if any) and the static page showing it, its checkpoint,
    cohorts, verdicts and findings, all read in one snapshot: the page shows the tree the audit
    read, and names its size and root."""
    from ledger.interop.report import render_report

    with audit_snapshot(ledger):
        audited, _ = audit_ledger(ledger, parallel=parallel, checkpoints=checkpoints)
        return render_report(ledger, audited, public=public, cohort=cohort), audited


def check_proof(
    proof: bytes,
    *,
    checkpoint: bytes | None = None,
    keys: Sequence[str] = (),
    leaf: bytes | None = None,
    witness_keys: Sequence[str] = (),
) -> ProofCheck:
    """What ``ledger check-proof`` runs, with no ledger file (LEDGER.md section 7, "Checking a
    proof offline"): ``proof`` is the bytes of a file ``ledger prove`` wrote (a C2SP tlog-proof,
    or an inclusion or consistency proof as JSON), checked against ``checkpoint`` (a note's
    bytes, signed or not) and verifier key strings ``keys`` (each must have signed it); ``leaf``
    is the entry body a tlog-proof proves; ``witness_keys`` (cosigner verifier keys) must each
    have cosigned the checkpoint (with no ``checkpoint``, ``proof`` may be the cosigned note
    itself). Input that cannot be checked raises ``LedgerError``;
    otherwise the ``ProofCheck`` says ``valid`` or gives the ``code`` and ``reason``."""
    return _check_proof(
        proof, checkpoint=checkpoint, keys=keys, leaf=leaf, witness_keys=witness_keys
    )


def check_result(
    ledger: Store,
    result: bytes,
    bundle: str | os.PathLike[str],
    *,
    cohort: str | None = None,
    task: str | None = None,
    source: str = "the result",
) -> ResultCheck:
    """What ``ledger check-result RESULT --bundle DIR`` runs (LEDGER.md section 12, "Checking a
    result the reference produced"): judge the bundle by the plan ``ledger`` committed for it,
    as ``verify`` would, recording nothing (``ledger`` may be opened read-only), and compare
    ``result`` (the bytes of a VerificationResult the reference produced; ``source`` names it
    in messages) field by field. ``ResultCheck.agrees`` (exit 0 or 1) is the verdict; each of
    its ``fields`` agrees, differs or is not compared, with the reason. ``result-invalid`` when
    ``result`` is not a VerificationResult 0.1; the bundle and task are refused as ``verify``
    refuses them, except that a burned cohort's plan still judges."""
    return _check_result(ledger, result, Path(bundle), cohort=cohort, task=task, source=source)


def _trust_file(trust: LoadedTrust | TrustFile | None) -> TrustFile | None:
    """The trust file itself, as ``load_trust`` read it or as given."""
    return trust.trust if isinstance(trust, LoadedTrust) else trust


def _reader_trust(
    witness_keys: Sequence[str], tsa_roots: Sequence[bytes], trust_file: TrustFile | None
) -> Trust:
    """The reader's trust for ``when``: the given witness keys and roots, each kind taken from
    ``trust_file`` when none is given, and its anchoring policy."""
    if trust_file is None:
        return trust_from(witness_keys, tsa_roots)
    return trust_from(
        list(witness_keys) or trust_file.witness_keys(),
        list(tsa_roots) or trust_file.tsa_roots(),
        cosignatures=trust_file.anchor.witnesses,
        timestamps=trust_file.anchor.timestamps,
    )


def _check_origin(ledger: Store, trust_file: TrustFile | None) -> None:
    """A trust file of another ledger is refused before anything is stated (a wrong file must
    not read as an unknown task or an anchor that does not count)."""
    if trust_file is not None:
        from ledger.format.trust import check_origin

        check_origin(trust_file, ledger.origin(), "given")


def when(
    ledger: Store,
    task: str,
    *,
    witness_keys: Sequence[str] = (),
    tsa_roots: Sequence[bytes] = (),
    trust: LoadedTrust | TrustFile | None = None,
) -> WhenStatement:
    """What ``ledger when TASK`` states (LEDGER.md section 7, "The statement: `ledger when`"):
    the freeze of ``task``'s plan, the earliest anchor holding it that the reader trusts
    (``witness_keys``: cosigner verifier key strings; ``tsa_roots``: PEM bytes of TSA roots;
    ``trust``: a trust file giving either when it is not given, and the anchoring policy an
    anchor must meet), and for each verification whether it was appended after such an
    anchor. ``holds`` is the verdict (exit 0 or 1); ``LedgerError`` when no statement can be
    made (exit 2)."""
    trust = _trust_file(trust)
    reader = _reader_trust(witness_keys, tsa_roots, trust)
    with ledger.snapshot():  # one state: every entry and anchor of one tree
        _check_origin(ledger, trust)
        return _when(task, ledger.entries(), reader)


def when_export(
    path: str | os.PathLike[str],
    task: str,
    *,
    witness_keys: Sequence[str] = (),
    tsa_roots: Sequence[bytes] = (),
    trust: LoadedTrust | TrustFile | None = None,
) -> WhenStatement:
    """``when`` over an export (``ledger when TASK --from-export FILE``), read as untrusted
    input like ``audit --from-export`` reads it; a public export keeps every entry, which is
    all the statement reads."""
    trust = _trust_file(trust)
    reader = _reader_trust(witness_keys, tsa_roots, trust)
    with open_export(Path(path)) as exported:
        _check_origin(exported, trust)
        return _when(task, exported.entries(), reader)


# Names that were part of this module and are not part of the face (docs/API.md,
# "Deprecation"): each still resolves, with a DeprecationWarning saying what to use, until the
# next minor version removes it. name -> (module, attribute, what to use instead).
_MOVED: dict[str, tuple[str, str, str]] = {
    "AnchorRule": ("ledger.operations.verify", "AnchorRule", "verify(..., trust=)"),
    "Ledger": ("ledger.store.sqlite", "SqliteStore", "Store (a ledger); SqliteStore (SQLite)"),
    "Timestamp": ("ledger.tlog.timestamp", "Timestamp", ""),
    "anchor_freeze": ("ledger.api", "_anchor_freeze", "freeze(..., trust=, signer_key=)"),
    "anchor_rule": ("ledger.trusting", "anchor_rule", "verify(..., trust=)"),
    "check_recorded_timestamp": ("ledger.tlog.timestamp", "check_recorded_timestamp", ""),
    "load_roots": ("ledger.tlog.timestamp", "load_roots", ""),
    "parse_witness_option": ("ledger.transparency.witnessing", "parse_witness_option", ""),
    "verify_cosignature": ("ledger.tlog.witness", "verify_cosignature", ""),
}


def __getattr__(name: str) -> Any:
    moved = _MOVED.get(name)
    if moved is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute, instead = moved
    warnings.warn(
        f"ledger.api.{name} is not part of the library's face and goes in the next minor"
        f" version: use {instead or f'{attribute} from {module}'}",
        DeprecationWarning,
        stacklevel=2,
    )
    import importlib

    return getattr(importlib.import_module(module), attribute)


__all__ = [
    "OUTCOMES",
    "AttestationCheck",
    "AuditReport",
    "AuditResult",
    "BatchRefused",
    "BatchRun",
    "BatchVerified",
    "BurnPlan",
    "BurnResult",
    "BurnTask",
    "CalibrateResult",
    "CalibrationReport",
    "CalibrationRow",
    "CandidateIdentity",
    "Checkpoint",
    "CheckpointNote",
    "CohortStatus",
    "CommitError",
    "ConsistencyProof",
    "CopyResult",
    "EarlierVerification",
    "Entry",
    "ErrorDetail",
    "ErrorDocument",
    "FreezeResult",
    "InclusionProof",
    "InitResult",
    "LedgerError",
    "LedgerRoles",
    "LoadedTrust",
    "Outcome",
    "ProofCheck",
    "ProofInputError",
    "ResultCheck",
    "Settings",
    "ShowEntry",
    "ShowObject",
    "ShowVerification",
    "Skipped",
    "StatusResult",
    "StatusWorkUnit",
    "Store",
    "StoreError",
    "TaskStatus",
    "TlogInclusionProof",
    "TrustFile",
    "TrustSource",
    "TsaReply",
    "UsageError",
    "Verdict",
    "VerificationResult",
    "VerifyResult",
    "Violation",
    "WhenStatement",
    "WitnessReply",
    "WitnessTarget",
    "WitnessedCheckpoint",
    "attestations",
    "audit",
    "audit_export",
    "audit_ledger",
    "audit_of_export",
    "batch_line",
    "browse",
    "burn",
    "calibrate",
    "check_attestation",
    "check_proof",
    "check_result",
    "check_trust_origin",
    "checkpoint",
    "checkpoint_note",
    "copy_ledger",
    "default_origin",
    "export",
    "find_ref",
    "find_trust",
    "freeze",
    "init_ledger",
    "load_key",
    "load_signer",
    "load_trust",
    "load_trusted_signers",
    "open_ledger",
    "plan_burn",
    "prove_consistency",
    "prove_inclusion",
    "read_log",
    "report_html",
    "settings_from_environ",
    "show",
    "status",
    "trust_beside",
    "verification_result",
    "verify",
    "verify_many",
    "when",
    "when_export",
    "witness_checkpoint",
]
