"""The authoring commands: ``new cohort``, ``new task``, ``seal``, ``lint``, ``digest``,
``bundle pack`` and ``freeze --dry-run`` (LEDGER.md section 14).

Thin wrappers over ``ledger.authoring``: parse arguments, call the library, write what it returns,
render. ``register`` adds them to the ``ledger`` app and receives the app's renderers and ``--db``,
so this module does not import ``ledger.cli.commands`` (no import cycle) and errors are rendered
once, by ``ledger.cli.commands.main``, like every other command's.
"""

import functools
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from ledger.cli.output import note_files
from ledger.cli.render import exit_code
from ledger.cli.wording import count
from ledger.errors import EXIT_FAILED, EXIT_OK, CommitError, UsageError

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
RootOpt = Annotated[
    Path,
    typer.Option(help="Folder the paths inside cohort.json are relative to (default: .)."),
]
MAX_LOG_BYTES = 64 * 1024 * 1024


def _system_clock() -> str:
    # Imported on use: the entry format (msgspec, blake3, the bundle reader) is not needed to
    # build the command tree, and check-patch never loads it.
    from ledger.format.entries import system_clock

    return system_clock()


def _default_busy_timeout() -> int:
    from ledger.settings import BUSY_TIMEOUT_MS  # on use, as the clock: check-patch loads neither

    return BUSY_TIMEOUT_MS


class _Io:
    """The app's renderers and ``--db``, handed over by ``register``."""

    say: Callable[[str], None] = print  # replaced by register
    emit_json: Callable[[Any], None] = print
    db: Callable[[], str | Path] = staticmethod(lambda: Path("ledger.db"))
    # The time for what a command writes (LEDGER_TIME, else the wall clock): the app's settings.
    now: Callable[[], str] = staticmethod(_system_clock)
    # How long a read of --db waits for a writer (LEDGER_BUSY_TIMEOUT_MS): the app's settings.
    busy_timeout_ms: Callable[[], int] = staticmethod(_default_busy_timeout)
    # Why a VerificationResult went its way, as `verify` prints it (the app's renderer).
    reason_lines: Callable[[dict[str, Any]], list[str]] = staticmethod(lambda _doc: [])


IO = _Io()

_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
new_app = typer.Typer(
    help="Write a new cohort skeleton, or add a task to one.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings=_SETTINGS,
)
bundle_app = typer.Typer(
    help="Write result bundles.",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings=_SETTINGS,
)


def register(
    app: typer.Typer,
    *,
    say: Callable[[str], None],
    emit_json: Callable[[Any], None],
    db: Callable[[], str | Path],
    now: Callable[[], str],
    busy_timeout_ms: Callable[[], int],
    reason_lines: Callable[[dict[str, Any]], list[str]],
) -> None:
    """Add the authoring commands to ``app``."""
    IO.say, IO.emit_json, IO.db, IO.now = say, emit_json, db, now
    IO.busy_timeout_ms, IO.reason_lines = busy_timeout_ms, reason_lines
    app.add_typer(new_app, name="new")
    app.add_typer(remove_app, name="remove")
    app.add_typer(bundle_app, name="bundle")
    app.command()(seal)
    app.command()(lint)
    app.command()(rehearse)
    app.command()(digest)


def _prefix(cohort_dir: Path, root: Path) -> str:
    """The cohort folder as seen from ROOT, with a trailing ``/`` (``""`` when the same)."""
    try:
        rel = Path(os.path.relpath(cohort_dir.resolve(), root.resolve()))
    except ValueError:
        rel = Path("..")
    if rel.parts and rel.parts[0] == "..":
        raise UsageError(
            "folder-unusable",
            f"the cohort folder {cohort_dir} is not inside ROOT {root}: paths in cohort.json are"
            " ROOT-relative (pass --root)",
        )
    text = rel.as_posix()
    return "" if text == "." else text + "/"


def _show_seal(sealed: Any, as_json: bool, *, written: bool) -> None:
    if as_json:
        IO.emit_json(
            {
                "cohort": sealed.cohort_id,
                "definition_digest": sealed.definition_digest,
                "stale": sealed.stale,
                "written": written,
                "changes": [
                    {"file": c.file, "pointer": c.pointer, "old": c.old, "new": c.new}
                    for c in sealed.changes
                ],
            }
        )
        return
    for change in sealed.changes:
        IO.say(f"{change.file}: {change.pointer}: {change.old} -> {change.new}")
    if not sealed.changes:
        IO.say("sealed: every digest and binding is already right; nothing changed")
    elif written:
        IO.say(f"sealed: {count(len(sealed.changes), 'field')} written")
    else:
        IO.say(f"stale: {count(len(sealed.changes), 'field')} would change (run `ledger seal`)")
    IO.say(f"definition digest {sealed.definition_digest}")


# -- new ----------------------------------------------------------------------------------------


@new_app.command("cohort")
def new_cohort(
    cohort_dir: Annotated[Path, typer.Argument(help="Folder to create (must not exist).")],
    cohort_id: Annotated[
        str | None, typer.Option("--id", help="Cohort id (default: the folder name).")
    ] = None,
    task_id: Annotated[
        str | None, typer.Option("--task", help="Id of the first task (default: ID/task-001).")
    ] = None,
    plan_version: Annotated[
        str, typer.Option(help="EvaluatorPlan version of the first task: 0.1, 0.2, 0.3 or 0.4.")
    ] = "0.4",
    repository: Annotated[
        str | None,
        typer.Option(
            help="URL of the source repository the tasks are about (default: a placeholder"
            " that lint and freeze refuse until you write it)."
        ),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option(
            help="Source revision (commit) the WorkUnits and plans are bound to (default: a"
            " placeholder, as for --repository)."
        ),
    ] = None,
    root: RootOpt = Path("."),
    from_fixtures: Annotated[
        Path | None,
        typer.Option(
            help="A folder of reference EvaluatorPlans (verification/fixtures/): write one"
            " cohort per plan into DIR, naming the plan and its WorkUnit where they are."
        ),
    ] = None,
    work_units: Annotated[
        Path | None,
        typer.Option(help="With --from-fixtures: the folder of the WorkUnits the plans bind."),
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """Write a cohort skeleton: cohort.json, one WorkUnit, one plan and a README explaining
    each field. Every digest is sealed; each value only you can write is a placeholder holding
    "REPLACE:" (with what to put there), which `ledger lint DIR` lists and `ledger freeze`
    refuses (placeholder-left). Write them, then `ledger seal DIR`; try the plan on sample
    bundles with `ledger rehearse DIR BUNDLE...` before you freeze.

    With --from-fixtures PLANS --work-units WUS: one cohort (one task) per reference plan in
    PLANS bound to a WorkUnit in WUS, under DIR/<plan name>/; the other plans are listed as
    skipped, with the reason."""
    if from_fixtures is not None:
        return _from_fixtures(cohort_dir, from_fixtures, work_units, root, repository, as_json)
    from ledger.authoring.files import write_new_folder
    from ledger.authoring.seal import seal as run_seal
    from ledger.authoring.skeleton import DEFAULT_REPOSITORY, DEFAULT_REVISION, check_id
    from ledger.authoring.skeleton import new_cohort as build

    prefix = _prefix(cohort_dir.parent, root) + cohort_dir.name + "/"
    cid = check_id(cohort_id or cohort_dir.name, "cohort id")
    files = build(
        cid,
        task_id=task_id or f"{cid}/task-001",
        plan_version=plan_version,
        prefix=prefix,
        repository=DEFAULT_REPOSITORY if repository is None else repository,
        revision=DEFAULT_REVISION if revision is None else revision,
    )
    written = note_files(cohort_dir)
    # No --force: replacing a cohort folder by a skeleton would throw the author's work away.
    hint = f"new cohort never replaces a folder: add a task with `ledger new task {cohort_dir}"
    hint += " --id ID`, or choose another folder"
    write_new_folder(cohort_dir, files, on_written=written, exists_hint=hint)
    sealed = run_seal(cohort_dir, root=root)
    from ledger.authoring.files import write_files

    write_files(sealed.writes, on_written=written)
    if as_json:
        IO.emit_json(
            {
                "cohort": cid,
                "folder": str(cohort_dir),
                "files": sorted(files),
                "definition_digest": sealed.definition_digest,
            }
        )
    else:
        files_written = count(len(files), "file")
        IO.say(f"wrote cohort {cid} in {cohort_dir} ({files_written}; read its README.md)")
        IO.say(f"definition digest {sealed.definition_digest}")
    return EXIT_OK


def _from_fixtures(
    out: Path,
    plans: Path,
    work_units: Path | None,
    root: Path,
    repository: str | None,
    as_json: bool,
) -> int:
    from ledger.authoring.files import write_new_folder
    from ledger.authoring.fixtures import from_fixtures
    from ledger.authoring.skeleton import DEFAULT_REPOSITORY

    if work_units is None:
        raise UsageError("usage-error", "--from-fixtures needs --work-units FOLDER")
    _prefix(out.parent, root)  # OUT inside ROOT: the cohorts' paths are ROOT-relative
    source = DEFAULT_REPOSITORY if repository is None else repository
    made = from_fixtures(plans, work_units, root=root, prefix="", repository=source)
    hint = "new cohort never replaces a folder: choose another folder"
    write_new_folder(out, made.files, on_written=note_files(out), exists_hint=hint)
    if as_json:
        IO.emit_json(
            {
                "folder": str(out),
                "cohorts": list(made.cohorts),
                "skipped": [{"file": f, "reason": r} for f, r in made.skipped],
            }
        )
        return EXIT_OK
    for cohort_id in made.cohorts:
        IO.say(f"wrote cohort {cohort_id}")
    for name, reason in made.skipped:
        IO.say(f"skipped {name}: {reason}")
    IO.say(f"{count(len(made.cohorts), 'cohort')} in {out}; freeze each: ledger freeze {out}/NAME")
    return EXIT_OK


def _cohort_json(cohort_dir: Path) -> dict[str, Any]:
    """cohort.json of ``cohort_dir`` as plain JSON, read as freeze reads it (bounded, strict)."""
    from ledger.documents.cohort_folder import COHORT_FILE, read_relative
    from verifiers.contracts import LIMITS
    from verifiers.jsonread import read_json

    limits = LIMITS["benchmark-cohort"]
    data = read_relative(cohort_dir, COHORT_FILE, limits.max_bytes, what="cohort file")
    read = read_json(data, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    if not read.ok or not isinstance(read.value, dict):
        raise CommitError(
            "document-invalid", f"{cohort_dir}/{COHORT_FILE} is not a JSON object; run lint"
        )
    value: dict[str, Any] = read.value
    return value


def _refuse_frozen(cohort: dict[str, Any], doing: str) -> None:
    """Refuse to change the tasks of a cohort id the ledger (--db, read-only) froze: any change
    of its tasks is a new definition, which that id can never have; checked before a write."""
    from ledger.authoring.seal import frozen_definitions

    cohort_id = cohort.get("id")
    frozen = frozen_definitions(IO.db(), busy_timeout_ms=IO.busy_timeout_ms())
    if isinstance(cohort_id, str) and cohort_id in frozen:
        raise CommitError(
            "cohort-already-frozen",
            f"cohort {cohort_id} is frozen in the ledger; {doing} would give it another"
            " definition. A changed cohort needs a new id (change /id in cohort.json first)",
        )


def _hidden_folder(folder: Path, cohort_dir: Path) -> Path:
    """The folder a hidden plan is written into: never inside the cohort folder."""
    from ledger.documents.cohort_folder import outside_cohort

    return outside_cohort(folder, cohort_dir, "--hidden")


@new_app.command("task")
def new_task(
    cohort_dir: Annotated[Path, typer.Argument(help="Cohort folder holding cohort.json.")],
    task_id: Annotated[str, typer.Option("--id", help="Id of the new task.")],
    plan_version: Annotated[
        str, typer.Option(help="EvaluatorPlan version: 0.1, 0.2, 0.3 or 0.4.")
    ] = "0.4",
    family: Annotated[
        str,
        typer.Option(
            help="bug_fix, test_failure, bounded_feature, refactor, documentation_contract or"
            " other."
        ),
    ] = "bug_fix",
    split: Annotated[
        str,
        typer.Option(
            help="development, train, pilot or held_out (a held-out WorkUnit must never have"
            " been seen)."
        ),
    ] = "development",
    hidden: Annotated[
        Path | None,
        typer.Option(
            "--hidden",
            metavar="FOLDER",
            help="Make the task's plan hidden: written into FOLDER (private, outside the"
            " cohort folder; created 0700), salted and bound; pass the same FOLDER as"
            " --hidden-plans to seal, lint, rehearse and freeze.",
        ),
    ] = None,
    repository: Annotated[
        str | None,
        typer.Option(
            help="URL of the source repository (default: the one the cohort's tasks name)."
        ),
    ] = None,
    revision: Annotated[
        str | None,
        typer.Option(help="Source revision the task is bound to (default: the cohort's)."),
    ] = None,
    root: RootOpt = Path("."),
    as_json: JsonOpt = False,
) -> int:
    """Add a task to a cohort: its WorkUnit and plan files, its entry in cohort.json, sealed.

    The task's source is the cohort's (the repository and revision its tasks name) unless
    --repository / --revision say otherwise; what only you can write (objective, paths, what
    the patch must add) is a placeholder that lint lists and freeze refuses. Refused
    (cohort-already-frozen) when the ledger (--db) froze the cohort's id."""
    from ledger.authoring.files import write_files
    from ledger.authoring.seal import seal as run_seal
    from ledger.authoring.skeleton import TaskChoices, add_task, pretty
    from ledger.documents.cohort_folder import COHORT_FILE
    from ledger.settings import random_salt

    prefix = _prefix(cohort_dir, root)
    folder = _hidden_folder(hidden, cohort_dir) if hidden is not None else None
    choices = TaskChoices(
        family=family, split=split, hidden_salt=None if folder is None else random_salt()
    )
    old = _cohort_json(cohort_dir)
    cohort, made = add_task(
        old,
        task_id,
        plan_version=plan_version,
        prefix=prefix,
        repository=repository,
        revision=revision,
        choices=choices,
    )
    _refuse_frozen(old, f"adding task {task_id}")
    targets = {cohort_dir / name: body for name, body in made.files.items()}
    private: dict[Path, bytes] = {}
    if folder is not None and made.hidden_plan is not None:
        name, body = made.hidden_plan
        private[folder / name] = body
    for path in (*targets, *private):
        if path.exists() or path.is_symlink():
            raise UsageError("file-exists", f"{path} already exists; not overwritten")
    from ledger.store.files import write_atomic

    written = note_files(cohort_dir)
    if folder is not None:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError("file-unwritable", f"cannot create {folder}: {exc.strerror}") from None
    for path, body in sorted(private.items()):  # as secret as the plan: its owner's only
        write_atomic(
            path, body, replace=False, mode=0o600, on_written=functools.partial(written, path)
        )
    for path, body in sorted(targets.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, body, replace=False, on_written=functools.partial(written, path))
    write_files({cohort_dir / COHORT_FILE: pretty(cohort)}, on_written=written)
    sealed = run_seal(cohort_dir, root=root, hidden_plans=folder, salts=random_salt)
    write_files(sealed.writes, on_written=written, private=sealed.private)
    files = sorted(str(p) for p in (*targets, *private))
    if as_json:
        IO.emit_json({"task": task_id, "files": files, "sealed": True})
    else:
        where = f"; its hidden plan is in {folder} (pass --hidden-plans {folder})" if folder else ""
        IO.say(f"added task {task_id} to {cohort_dir} ({', '.join(files)}){where}")
    return EXIT_OK


remove_app = typer.Typer(
    help="Remove a task from a cohort folder (before it is frozen).",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings=_SETTINGS,
)


@remove_app.command("task")
def remove_task(
    cohort_dir: Annotated[Path, typer.Argument(help="Cohort folder holding cohort.json.")],
    task_id: Annotated[str, typer.Option("--id", help="Id of the task to remove.")],
    root: RootOpt = Path("."),
    as_json: JsonOpt = False,
) -> int:
    """Remove a task from a cohort folder: its entry in cohort.json, and its WorkUnit and plan
    files when they are inside the cohort folder and no other task names them; then seal.

    Files outside the cohort folder (a reference fixture named in place, a hidden plan) are
    left as they are and listed. Refused (cohort-already-frozen) when the ledger (--db) froze
    the cohort's id: a frozen cohort never changes."""
    from ledger.authoring.files import remove_files, write_files
    from ledger.authoring.seal import seal as run_seal
    from ledger.authoring.skeleton import pretty
    from ledger.authoring.skeleton import remove_task as without

    cohort = _cohort_json(cohort_dir)
    removal = without(cohort, task_id, cohort_prefix=_prefix(cohort_dir, root))
    _refuse_frozen(cohort, f"removing task {task_id}")
    written = note_files(cohort_dir)
    write_files({cohort_dir / "cohort.json": pretty(removal.cohort)}, on_written=written)
    removed = remove_files(root, removal.removed)
    sealed = run_seal(cohort_dir, root=root)
    write_files(sealed.writes, on_written=written)
    if as_json:
        IO.emit_json(
            {
                "task": task_id,
                "removed": removed,
                "kept": [{"file": f, "reason": why} for f, why in removal.kept],
                "definition_digest": sealed.definition_digest,
            }
        )
    else:
        IO.say(f"removed task {task_id} from {cohort_dir}")
        for path in removed:
            IO.say(f"  deleted {path}")
        for path, why in removal.kept:
            IO.say(f"  kept {path} ({why})")
        IO.say(f"definition digest {sealed.definition_digest}")
    return EXIT_OK


# -- seal / lint / digest -----------------------------------------------------------------------


def seal(
    cohort_dir: Annotated[Path, typer.Argument(help="Cohort folder holding cohort.json.")],
    root: RootOpt = Path("."),
    hidden_plans: Annotated[
        Path | None,
        typer.Option(
            help="Folder of the hidden plans the cohort's hidden tasks name (by plan id): sealed"
            " too, and each unsalted one given a secret salt."
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Change nothing; exit 1 when anything is stale.")
    ] = False,
    as_json: JsonOpt = False,
) -> int:
    """Recompute and write every digest and binding of a cohort folder, in dependency order:
    WorkUnit digests, plan bindings and digests, task entries, the definition digest.

    Shows what changed. Writes digests only, never a value that changes meaning; with
    --hidden-plans, also a 256-bit random salt into each hidden plan that has none (never
    shown; the plan is written readable by its owner only). Refuses (cohort-already-frozen)
    when the ledger (--db, if it exists) froze this cohort id with another definition. Exit 0
    when sealed, 1 with --check when anything is stale."""
    from ledger.authoring.files import write_files
    from ledger.authoring.seal import frozen_definitions
    from ledger.authoring.seal import seal as run_seal
    from ledger.settings import random_salt

    frozen = frozen_definitions(IO.db(), busy_timeout_ms=IO.busy_timeout_ms())
    sealed = run_seal(
        cohort_dir, root=root, frozen=frozen, hidden_plans=hidden_plans, salts=random_salt
    )
    if not check:
        write_files(sealed.writes, on_written=note_files(cohort_dir), private=sealed.private)
    # "written" is what happened: nothing is, with --check or when nothing was stale.
    _show_seal(sealed, as_json, written=not check and bool(sealed.writes))
    return EXIT_FAILED if check and sealed.stale else EXIT_OK


def _show_report(report: Any, as_json: bool) -> int:
    if as_json:
        IO.emit_json(report.to_json())
        return EXIT_OK if report.ok else EXIT_FAILED
    for p in report.problems:
        IO.say(f"{p.file}: {p.pointer or '/'}: {p.code}: {p.message}")
        IO.say(f"  expected: {p.expected}")
        IO.say(f"  fix: {p.fix}")
    for note in report.notes:
        IO.say(note)
    if report.ok:
        IO.say(f"ok: cohort {report.cohort}, {count(report.tasks, 'task')}, no error")
        IO.say(f"definition digest {report.definition_digest}")
        return EXIT_OK
    IO.say(count(len(report.problems), "error"))
    return EXIT_FAILED


def lint(
    cohort_dir: Annotated[Path, typer.Argument(help="Cohort folder holding cohort.json.")],
    root: RootOpt = Path("."),
    hidden_plans: Annotated[
        Path | None,
        typer.Option(help="Folder of hidden EvaluatorPlans, matched to tasks by plan_digest."),
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """List every contract error of every document of a cohort folder at once.

    The same checks as `ledger freeze`, in the same order, each error with its file, JSON
    pointer, what was expected and how to fix it. Writes nothing. Exit 0 when clean, 1 when
    any error (`freeze --dry-run` adds the checks against the ledger)."""
    from ledger.authoring.lint import lint as run_lint

    return _show_report(run_lint(cohort_dir, root=root, hidden_plans=hidden_plans), as_json)


REHEARSAL: Final = "rehearsal: not recorded"


def rehearse(
    cohort_dir: Annotated[Path, typer.Argument(help="Cohort folder holding cohort.json.")],
    bundles: Annotated[
        list[Path],
        typer.Argument(
            help="Sample result bundle folder(s) to judge.", metavar="BUNDLE...", show_default=False
        ),
    ],
    task: Annotated[
        str | None,
        typer.Option(
            help="Task id: one of the tasks of the manifest's WorkUnit, or any task when the"
            " manifest cannot name one (as for verify)."
        ),
    ] = None,
    root: RootOpt = Path("."),
    hidden_plans: Annotated[
        Path | None,
        typer.Option(help="Folder of hidden EvaluatorPlans, matched to tasks by plan_digest."),
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """Try a cohort's plans on sample bundles before freezing: judged, never recorded.

    Each bundle is judged as `ledger verify` would judge it once the cohort is frozen (the same
    task choice, bundle reader and verifiers), but by the plan the folder holds now. No ledger
    is opened and nothing is written: every line says "rehearsal: not recorded", and no
    rehearsal is a verdict (`verify` after `freeze` records one). Exit 0 when every bundle is
    judged support, 1 when any is not, 2 when any is refused (like a batch verify)."""
    from ledger.operations.rehearse import Refused
    from ledger.operations.rehearse import rehearse as run_rehearse

    done = run_rehearse(
        cohort_dir, bundles, root=root, time=IO.now(), hidden_plans=hidden_plans, task=task
    )
    if as_json:
        IO.emit_json(
            {
                "rehearsal": True,
                "recorded": False,
                "cohort": done.cohort,
                "definition_digest": done.definition_digest,
                "lint_problems": done.lint_problems,
                "bundles": [_rehearsed_json(b) for b in done.bundles],
            }
        )
        return exit_code(done)
    for b in done.bundles:
        if isinstance(b, Refused):
            IO.say(f"{REHEARSAL}: {b.bundle}: REFUSED {b.error.code}: {b.error.message}")
            continue
        IO.say(
            f"{REHEARSAL}: {b.bundle}: {b.outcome.upper()}: {done.cohort} / {b.task}"
            f" (plan {b.plan_id}, {b.adapter} {b.adapter_version})"
        )
        for line in IO.reason_lines(b.verification_result):  # as verify prints them
            IO.say(f"{REHEARSAL}: {line}")
    ready = (
        "lint finds no problem in it"
        if not done.lint_problems
        else f"the folder is not ready to freeze: {done.lint_problems} lint problem(s),"
        " `ledger lint` lists them"
    )
    refused = sum(1 for b in done.bundles if isinstance(b, Refused))
    judged = f"{count(len(done.bundles) - refused, 'bundle')} judged by the plans of {cohort_dir}"
    if refused:  # a refused bundle was not judged: counted apart
        judged += f" ({count(refused, 'bundle')} refused)"
    IO.say(f"{REHEARSAL}: {judged}; {ready}")
    return exit_code(done)


def _rehearsed_json(b: Any) -> dict[str, Any]:
    """One bundle of ``rehearse --json``: its outcome and result named as a rehearsal's, so
    no reader of verify's ``outcome`` / ``verification_result`` takes it for a verdict."""
    from ledger.operations.rehearse import Refused

    if isinstance(b, Refused):
        error = {"code": b.error.code, "message": b.error.message}
        return {"status": "refused", "bundle": b.bundle, "error": error}
    return {
        "status": "rehearsed",
        "bundle": b.bundle,
        "task": b.task,
        "plan": {"id": b.plan_id, "digest": b.plan_digest},
        "adapter": b.adapter,
        "adapter_version": b.adapter_version,
        "rehearsal_outcome": b.outcome,
        "rehearsal_result": b.verification_result,
    }


def freeze_dry_run(
    db: str | Path,
    cohort_dir: Path,
    *,
    root: Path,
    hidden_plans: Path | None,
    reuse_exposed: dict[str, str],
    as_json: bool,
) -> int:
    """``ledger freeze --dry-run``: lint plus the ledger-state checks; writes nothing."""
    from ledger.authoring.lint import dry_run
    from ledger.operations.freeze import check_reuse_reasons, state_checks

    report = dry_run(
        db,
        cohort_dir,
        root=root,
        hidden_plans=hidden_plans,
        state_checks=state_checks(check_reuse_reasons(reuse_exposed)),
        busy_timeout_ms=IO.busy_timeout_ms(),
    )
    return _show_report(report, as_json)


def digest(
    file: Annotated[Path, typer.Argument(help="The file: a JSON document, or any bytes.")],
    raw: Annotated[
        bool, typer.Option("--raw", help="sha256 of the exact bytes (artifact and log digests).")
    ] = False,
    as_json: JsonOpt = False,
) -> int:
    """Print a digest, named by its kind: `canonical` (default), the reference canonical digest
    of a JSON document (WorkUnit, plan, manifest digests), or `raw` with --raw, the sha256 of
    the file's bytes (artifact and log digests)."""
    from ledger.authoring.digest import MAX_JSON_BYTES, json_digest, raw_digest

    data = _read_file(file, MAX_LOG_BYTES if raw else MAX_JSON_BYTES)
    result = raw_digest(data) if raw else json_digest(data, what=str(file))
    if as_json:
        IO.emit_json({"file": str(file), "kind": result.kind, "digest": result.digest})
    else:
        IO.say(f"{result.kind} {result.digest}  {file}")
    return EXIT_OK


def _read_file(path: Path, limit: int) -> bytes:
    """An operator-named file, regular and bounded, read once (never waited on: a FIFO is
    refused)."""
    from ledger.operator_files import read_operator_file

    return read_operator_file(path, limit)


# -- bundle pack --------------------------------------------------------------------------------


@bundle_app.command("pack")
def bundle_pack(
    repo: Annotated[Path, typer.Option(help="The git repository holding the change.")],
    base: Annotated[str, typer.Option(help="The revision the change is against.")],
    work_unit: Annotated[Path, typer.Option(help="The WorkUnit file the change answers.")],
    out: Annotated[Path, typer.Option(help="The bundle folder to write (must not exist).")],
    head: Annotated[str, typer.Option(help="The revision holding the change.")] = "HEAD",
    stdout: Annotated[
        Path | None, typer.Option("--stdout", help="The worker's stdout log (default: empty).")
    ] = None,
    stderr: Annotated[
        Path | None, typer.Option("--stderr", help="The worker's stderr log (default: empty).")
    ] = None,
    status: Annotated[
        str, typer.Option(help="Worker status: succeeded, failed, error, timeout, cancelled.")
    ] = "succeeded",
    attempt: Annotated[
        int | None,
        typer.Option(
            help="Attempt number (1, 2, ...; default: one more than any bundle beside --out"
            " states for the same WorkUnit, else 1).",
            show_default=False,
        ),
    ] = None,
    worker_id: Annotated[str, typer.Option(help="The worker's id.")] = "local-worker",
    summary: Annotated[str, typer.Option(help="The worker's one-line summary.")] = "",
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out.")] = False,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="Pack an empty change (HEAD is BASE or has its tree): a no-op candidate on"
            " purpose. Without it an empty change is refused (change-empty).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> int:
    """Write a reference-shaped result bundle for the change BASE..HEAD of a git repository:
    changes.patch (`git diff`), stdout.txt, stderr.txt and result-manifest.json with every
    digest and the WorkUnit binding. `ledger verify OUT` then judges it.

    Runs git only (fixed argv, no shell, no hooks, no system or global config, no external
    diff or textconv), never the candidate's code, and reads the repository as hostile: every
    object of the change is hashed and the diff is made from those alone, then checked to turn
    BASE into HEAD. --base must be the WorkUnit's source revision, which must be a full commit
    id or a tag of the repository (never a branch: it moves); the commit it names is recorded.
    Times come from LEDGER_TIME, else the clock. An empty change is refused, saying what to
    commit when the work tree holds uncommitted changes (the change must be committed: HEAD
    names a commit)."""
    from ledger.authoring.bundle_pack import pack
    from ledger.authoring.files import write_new_folder

    git = shutil.which("git")
    if git is None:
        raise UsageError("git-failed", "git is not on PATH; bundle pack needs it")
    if not repo.is_dir():
        raise UsageError("folder-unusable", f"--repo {repo} is not a folder")
    if out.exists() and not force:
        raise UsageError("file-exists", f"{out} already exists (pass --force to replace it)")
    work_unit_bytes = _read_file(work_unit, 4 * 1024 * 1024)
    if attempt is None:
        from ledger.authoring.bundle_pack import next_attempt

        # A fresh number, so candidates of one task packed side by side read differently.
        attempt = next_attempt(out, work_unit_bytes)
    now = IO.now()
    packed = pack(
        git=git,
        repo=repo,
        base=base,
        head=head,
        work_unit_bytes=work_unit_bytes,
        work_unit_name=str(work_unit),
        stdout=_read_file(stdout, MAX_LOG_BYTES) if stdout is not None else b"",
        stderr=_read_file(stderr, MAX_LOG_BYTES) if stderr is not None else b"",
        status=status,
        started_at=now,
        finished_at=now,
        attempt=attempt,
        worker_id=worker_id,
        summary=summary,
        allow_empty=allow_empty,
    )
    write_new_folder(out, packed.files, force=force, on_written=note_files(out))
    if as_json:
        IO.emit_json(
            {
                "bundle": str(out),
                "base": packed.base,
                "head": packed.head,
                "files_changed": packed.files_changed,
                "patch_digest": packed.patch_digest,
                "manifest_digest": packed.manifest_digest,
                "attempt": attempt,
                "files": sorted(packed.files),
                "source_revision": None
                if packed.source_revision is None
                else {"name": packed.source_revision, "commit": packed.base},
            }
        )
    else:
        IO.say(
            f"wrote bundle {out}: attempt {attempt}, {count(packed.files_changed, 'file')}"
            f" changed ({packed.base[:12]}..{packed.head[:12]})"
        )
        if packed.source_revision not in (None, packed.base):
            IO.say(f"source revision {packed.source_revision} is commit {packed.base}")
        IO.say(f"patch raw {packed.patch_digest}")
        IO.say(f"result-manifest.json canonical {packed.manifest_digest}")
    return EXIT_OK
