"""The example cohorts and result bundles, generated in code so they never drift.

``python -m tools.examples --write ROOT`` writes every file below relative to ROOT (the
repository root); ``--check ROOT`` exits 1 and lists each file that is missing, different or
unexpected. The bytes are deterministic: no clock, no randomness, sorted iteration.

What is generated (paths inside every cohort.json are relative to the repository root):

- ``cohorts/demo/``: cohort ``example/demo``, stage frozen, six tasks on a fictional
  ``inventory-api`` service over plan versions 0.2 (whole line), 0.3 (added substring) and 0.4
  (added and removed transition); its bundles are ``fixtures/demo/bundles/<task>/<attempt>/``.
- ``cohorts/phase-b2-pilot/``: cohort ``example/phase-b2-pilot``, stage burned, five pilot tasks
  on a fictional ``benchkit`` tool whose v0.2 plans hold fragments (the failure that burned it);
  Task 001 was solved in public. ``fixtures/demo/pilot-bundles/`` holds that observed solution.
- ``cohorts/phase-b2-successor/``: cohort ``example/phase-b2-successor``, stage frozen, held-out:
  the pilot's unobserved WorkUnits 002-005 (same files, same digests) under new v0.3/v0.4 plans,
  plus a fresh Task 001 with a new WorkUnit. Task 004's plan is hidden: it lives in
  ``cohorts/phase-b2-successor-hidden-plans/`` and is passed with ``--hidden-plans``.
  Its bundles are ``fixtures/demo/successor-bundles/<task>/<attempt>/``.
- ``fixtures/demo/expected.json``: bundle path -> expected outcome (``support`` | ``reject``).
- ``fixtures/demo/base/<repository>/``: the source files the patches apply to, so anyone can
  check a patch with ``git apply --check``.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ledger.documents.cohort import definition_digest
from ledger.documents.cohort_folder import PLAN_SALT_EXTENSION
from verifiers.canonical import canonical_digest

# --------------------------------------------------------------------------- constants

DEMO_COHORT_ID: Final = "example/demo"
PILOT_COHORT_ID: Final = "example/phase-b2-pilot"
SUCCESSOR_COHORT_ID: Final = "example/phase-b2-successor"

DEMO_DIR: Final = "cohorts/demo"
PILOT_DIR: Final = "cohorts/phase-b2-pilot"
SUCCESSOR_DIR: Final = "cohorts/phase-b2-successor"
HIDDEN_PLANS_DIR: Final = "cohorts/phase-b2-successor-hidden-plans"
FIXTURES_DIR: Final = "fixtures/demo"
EXPECTED_FILE: Final = f"{FIXTURES_DIR}/expected.json"

# Folders this module owns entirely: ``--check`` reports any file in them it did not generate.
OWNED_DIRS: Final = (DEMO_DIR, PILOT_DIR, SUCCESSOR_DIR, HIDDEN_PLANS_DIR, FIXTURES_DIR)

VALIDATOR_IDS: Final = ("result-manifest-schema", "independent-review")
CANDIDATE_ID: Final = "candidate-patch"
SIGNATURES: Final = ("single-worker-baseline-v1", "two-independent-attempts-v1")
METRICS: Final = ("wall_seconds", "human_minutes")
ADAPTER_OF_PLAN: Final[Mapping[str, str]] = {"0.2": "0.1.1", "0.3": "0.2.0", "0.4": "0.3.0"}


def _revision(label: str) -> str:
    """A stable, realistic-looking 40-hex commit id for a fictional repository state."""
    return hashlib.sha1(label.encode(), usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class Repository:
    name: str
    url: str
    revision: str
    files: Mapping[str, str]  # path -> text at ``revision`` (only the files the tasks touch)


# --------------------------------------------------------------------------- fictional sources

INVENTORY: Final = Repository(
    name="inventory-api",
    url="https://git.example.org/acme/inventory-api",
    revision=_revision("acme/inventory-api demo base"),
    files={
        "README.md": (
            "# inventory-api\n"
            "\n"
            "A small HTTP service that tracks stock levels for the Acme warehouse.\n"
            "\n"
            "## Running\n"
            "\n"
            "    python -m inventory.server --config config/service.yaml\n"
            "\n"
            "## Support\n"
            "\n"
            "Questions go to the #inventory channel.\n"
        ),
        "src/inventory/config.py": (
            '"""Service configuration loading."""\n'
            "\n"
            "from __future__ import annotations\n"
            "\n"
            "from pathlib import Path\n"
            "from typing import Any\n"
            "\n"
            "import yaml\n"
            "\n"
            "\n"
            "def load_config(path: Path) -> dict[str, Any]:\n"
            '    """Read the service configuration file."""\n'
            '    with path.open("r", encoding="utf-8") as handle:\n'
            "        data = yaml.load(handle, Loader=yaml.Loader)\n"
            "    if not isinstance(data, dict):\n"
            '        raise ValueError(f"{path}: configuration must be a mapping")\n'
            "    return data\n"
        ),
        "config/defaults.yaml": (
            "# Defaults applied before config/service.yaml is read.\n"
            "listen: 127.0.0.1:8080\n"
            "page_size: 50\n"
            "request_timeout_seconds: 0  # 0 disables the timeout\n"
            "log_level: info\n"
        ),
        ".github/workflows/ci.yml": (
            "name: ci\n"
            "on: [push, pull_request]\n"
            "jobs:\n"
            "  test:\n"
            "    runs-on: ubuntu-latest\n"
            "    steps:\n"
            "      - uses: actions/checkout@v4\n"
            "      - run: pip install -e .[test]\n"
            "      - run: pytest -q\n"
        ),
        "src/inventory/query.py": (
            '"""Query-string helpers for the listing endpoints."""\n'
            "\n"
            "from __future__ import annotations\n"
            "\n"
            "from urllib.parse import parse_qsl\n"
            "\n"
            "\n"
            "def _parse_qs(raw: str) -> dict[str, str]:\n"
            '    """Parse a query string; later values win."""\n'
            "    return dict(parse_qsl(raw, keep_blank_values=True))\n"
        ),
        "src/inventory/server.py": (
            '"""HTTP entry point."""\n'
            "\n"
            "from __future__ import annotations\n"
            "\n"
            "from inventory.query import _parse_qs\n"
            "\n"
            "\n"
            "def list_items(query_string: str) -> dict[str, str]:\n"
            '    """Handle GET /items."""\n'
            "    params = _parse_qs(query_string)\n"
            '    return {"page": params.get("page", "1")}\n'
        ),
        "docs/api.md": (
            "# inventory-api HTTP API\n"
            "\n"
            "## GET /items\n"
            "\n"
            "Returns one page of items, newest first.\n"
            "\n"
            "| parameter | meaning |\n"
            "|---|---|\n"
            "| page | 1-based page number |\n"
            "| page_size | items per page (default 50) |\n"
        ),
    },
)

BENCHKIT: Final = Repository(
    name="benchkit",
    url="https://git.example.org/acme/benchkit",
    revision=_revision("acme/benchkit phase-b2 base"),
    files={
        "src/benchkit/cli.py": (
            '"""benchkit command line."""\n'
            "\n"
            "from __future__ import annotations\n"
            "\n"
            "import argparse\n"
            "import json\n"
            "from pathlib import Path\n"
            "\n"
            "from benchkit.manifest import definition_digest, load_manifest\n"
            "\n"
            "\n"
            "def cmd_validate(args: argparse.Namespace) -> int:\n"
            "    manifest = load_manifest(Path(args.manifest))\n"
            "    print(f\"valid: {manifest['id']}\")\n"
            "    return 0\n"
            "\n"
            "\n"
            "def cmd_digest(args: argparse.Namespace) -> int:\n"
            '    with open(args.manifest, encoding="utf-8") as handle:\n'
            "        manifest = json.load(handle)\n"
            "    print(definition_digest(manifest))\n"
            "    return 0\n"
            "\n"
            "\n"
            "def build_parser() -> argparse.ArgumentParser:\n"
            '    parser = argparse.ArgumentParser(prog="benchkit")\n'
            '    sub = parser.add_subparsers(dest="command", required=True)\n'
            '    validate = sub.add_parser("validate", help="check a benchmark manifest")\n'
            '    validate.add_argument("manifest")\n'
            "    validate.set_defaults(handler=cmd_validate)\n"
            '    digest = sub.add_parser("digest", help="print a manifest\'s definition digest")\n'
            '    digest.add_argument("manifest")\n'
            "    digest.set_defaults(handler=cmd_digest)\n"
            "    return parser\n"
        ),
        "src/benchkit/report.py": (
            '"""Cached run reports."""\n'
            "\n"
            "from __future__ import annotations\n"
            "\n"
            "import pickle\n"
            "from pathlib import Path\n"
            "from typing import Any\n"
            "\n"
            "\n"
            "def read_cached_report(path: Path) -> dict[str, Any]:\n"
            '    """Load a cached report written by an earlier run."""\n'
            '    with path.open("rb") as handle:\n'
            "        report = pickle.load(handle)\n"
            "    return dict(report)\n"
        ),
    },
)


def _edit(text: str, old: str, new: str) -> str:
    """``text`` with the one occurrence of ``old`` replaced (a generator bug otherwise)."""
    if text.count(old) != 1:
        raise RuntimeError(f"example edit expects exactly one {old!r}")
    return text.replace(old, new)


def _blob_id(text: str | None) -> str:
    """Git's abbreviated blob id of ``text`` (all zeros for an absent side)."""
    if text is None:
        return "0" * 7
    data = text.encode()
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()[:7]


@dataclass(frozen=True)
class Change:
    """One file of a patch: ``before`` None adds the file, ``after`` None deletes it."""

    path: str
    before: str | None
    after: str | None


def make_patch(changes: Sequence[Change]) -> bytes:
    """A Git unified diff (three lines of context) of ``changes``, as ``git diff`` writes it."""
    out: list[str] = []
    for change in changes:
        a_lines = [] if change.before is None else change.before.splitlines(keepends=True)
        b_lines = [] if change.after is None else change.after.splitlines(keepends=True)
        out.append(f"diff --git a/{change.path} b/{change.path}\n")
        old_id, new_id = _blob_id(change.before), _blob_id(change.after)
        if change.before is None:
            out.append("new file mode 100644\n")
            out.append(f"index {old_id}..{new_id}\n")
        elif change.after is None:
            out.append("deleted file mode 100644\n")
            out.append(f"index {old_id}..{new_id}\n")
        else:
            out.append(f"index {old_id}..{new_id} 100644\n")
        body = list(
            difflib.unified_diff(
                a_lines,
                b_lines,
                fromfile="/dev/null" if change.before is None else f"a/{change.path}",
                tofile="/dev/null" if change.after is None else f"b/{change.path}",
                n=3,
            )
        )
        out.extend(body)
    return "".join(out).encode()


def _modify(repo: Repository, path: str, *edits: tuple[str, str]) -> Change:
    text = repo.files[path]
    for old, new in edits:
        text = _edit(text, old, new)
    return Change(path, repo.files[path], text)


# --------------------------------------------------------------------------- documents


def pretty(value: Any) -> bytes:
    """File bytes of a generated JSON document: insertion order, indented, final newline."""
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class TaskSpec:
    """One task: its WorkUnit, its plan, and its cohort entry."""

    number: str  # "001"
    slug: str  # short name, also the bundle folder name
    task_prefix: str  # task ids are ``<task_prefix>/<number>-<slug>``
    work_unit_id: str
    repo: Repository
    family: str
    difficulty: str
    split: str
    kind: str  # WorkUnit kind
    objective: str
    allowed: tuple[str, ...]
    forbidden: tuple[str, ...]
    plan_version: str
    semantic: Mapping[str, Sequence[str]]
    negative: tuple[str, str]  # (description, expected_category)
    evidence: Mapping[str, Any] = field(
        default_factory=lambda: {"status": "pending", "attempts": []}
    )
    visibility: str = "public"
    plan_suffix: str = "evaluator"

    @property
    def task_id(self) -> str:
        return f"{self.task_prefix}/{self.number}-{self.slug}"

    @property
    def plan_id(self) -> str:
        return f"{self.task_id}/{self.plan_suffix}"

    @property
    def file_stem(self) -> str:
        return f"task-{self.number}-{self.slug}"


def work_unit_doc(spec: TaskSpec) -> dict[str, Any]:
    """A WorkUnit 0.2 for a patch task (exactly the two validators a patch plan implements)."""
    return {
        "schema_version": "0.2",
        "id": spec.work_unit_id,
        "version": 1,
        "kind": spec.kind,
        "objective": spec.objective,
        "inputs": [
            {
                "id": "source-repository",
                "type": "git_ref",
                "locator": f"{spec.repo.url}@{spec.repo.revision}",
            }
        ],
        "outputs": [
            {
                "id": CANDIDATE_ID,
                "type": "patch",
                "description": "A Git unified diff against the source revision.",
                "media_type": "text/x-diff",
            }
        ],
        "dependencies": [],
        "requirements": {
            "capabilities": ["git", "python"],
            "resources": {"cpu_cores_min": 1, "memory_mb_min": 512, "gpu": "none"},
        },
        "constraints": {
            "allowed_paths": list(spec.allowed),
            "forbidden_paths": list(spec.forbidden),
            "policies": ["candidate-only", "independent-verification-required"],
        },
        "uncertainty": [
            {
                "statement": "The evaluator plan is a static proxy; it does not run the code.",
                "confidence": 0.8,
            }
        ],
        "security": {
            "risk_class": "low",
            "data_classification": "public",
            "minimum_worker_trust": "untrusted",
            "sandbox_required": True,
        },
        "permissions": {
            "network": "none",
            "filesystem_write": list(spec.allowed),
            "secrets": [],
            "process_execution": True,
        },
        "verification_policy": {
            "strategy": "all_required",
            "independent_from_worker": True,
            "minimum_independent_verifiers": 1,
        },
        "validators": [
            {"id": VALIDATOR_IDS[0], "type": "schema", "required": True},
            {"id": VALIDATOR_IDS[1], "type": "review", "required": True},
        ],
        "evidence_requirements": [
            {"type": "artifact_hash", "required": True},
            {"type": "review", "required": True},
        ],
        "budget": {
            "wall_seconds": 1800,
            "tokens": 200000,
            "project_spend_usd_max": 0,
            "paid_fallback_allowed": False,
        },
        "provenance": {
            "created_by": "benchmark-maintainer",
            "creator_type": "human",
            "source": f"{spec.repo.url} task {spec.number}",
            "source_revision": spec.repo.revision,
        },
        "failure_semantics": {"retryable": True, "max_attempts": 2, "on_failure": "escalate"},
    }


def example_salt(spec: TaskSpec) -> str:
    """A hidden example plan's salt (LEDGER.md section 8, "Hidden plans"). Derived from the plan
    id so the examples stay byte for byte reproducible: an example's salt is as public as the
    example itself, whose plan file is in the repository. A real hidden plan gets 256 random
    bits from ``ledger seal --hidden-plans`` and keeps them as secret as the plan."""
    return hashlib.sha256(f"example hidden plan salt: {spec.plan_id}".encode()).hexdigest()


def plan_doc(spec: TaskSpec) -> dict[str, Any]:
    """An EvaluatorPlan 0.2/0.3/0.4 bound to ``spec``'s WorkUnit (what ``check_binding`` wants);
    a hidden one carries its salt."""
    backend: dict[str, Any] = {
        "type": "unified_diff",
        "max_candidate_bytes": 65536,
        "max_log_bytes": 65536,
        "required_log_types": ["stdout", "stderr"],
        "require_nonempty_patch": True,
        "verify_log_digests": True,
    }
    for key, values in spec.semantic.items():
        backend[key] = list(values)
    doc: dict[str, Any] = {
        "schema_version": spec.plan_version,
        "id": spec.plan_id,
        "binding": {
            "work_unit_id": spec.work_unit_id,
            "work_unit_version": 1,
            "work_unit_digest": canonical_digest(work_unit_doc(spec)),
            "source_revision": spec.repo.revision,
        },
        "visibility": spec.visibility,
        "execution_mode": "metadata_only",
        "verifier": {
            "id": "idkmesh-local-verifier",
            "type": "system",
            "adapter": "deterministic-patch-verifier",
            "adapter_version": ADAPTER_OF_PLAN[spec.plan_version],
        },
        "required_validator_ids": list(VALIDATOR_IDS),
        "candidate_artifact_id": CANDIDATE_ID,
        "policy": {
            "require_plan_outside_candidate_root": True,
            "require_output_outside_candidate_root": True,
            "require_verifier_distinct_from_worker": True,
        },
        "backend": backend,
    }
    if spec.visibility == "hidden":
        doc["extensions"] = {PLAN_SALT_EXTENSION: example_salt(spec)}
    return doc


def cohort_task(spec: TaskSpec, *, work_unit_path: str, plan_path: str | None) -> dict[str, Any]:
    evaluator: dict[str, Any] = {
        "visibility": spec.visibility,
        "plan_id": spec.plan_id,
        "plan_digest": canonical_digest(plan_doc(spec)),
        "backend": "unified_diff",
    }
    if plan_path is not None:
        evaluator["plan_path"] = plan_path
    return {
        "id": spec.task_id,
        "family": spec.family,
        "difficulty": spec.difficulty,
        "split": spec.split,
        "source": {"repository": spec.repo.url, "revision": spec.repo.revision},
        "work_unit": {
            "path": work_unit_path,
            "digest": canonical_digest(work_unit_doc(spec)),
            "id": spec.work_unit_id,
            "version": 1,
        },
        "evaluator": evaluator,
        "declared_structural_signatures": list(SIGNATURES),
        "negative_case": {
            "description": spec.negative[0],
            "expected_category": spec.negative[1],
            "evidence_status": "pending",
        },
        "accounting": {"required_metrics": list(METRICS)},
        "evidence": dict(spec.evidence),
    }


_AUTHORITY: Final = {
    "canonical_state_write": False,
    "git_push": False,
    "merge": False,
    "automatic_candidate_selection": False,
}
_FAMILIES: Final = (
    "bug_fix",
    "test_failure",
    "bounded_feature",
    "refactor",
    "documentation_contract",
)


def cohort_doc(
    *,
    cohort_id: str,
    title: str,
    description: str,
    stage: str,
    tasks: list[dict[str, Any]],
    extensions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A BenchmarkCohort 0.1 with its ``definition_digest`` computed from the projection."""
    doc: dict[str, Any] = {
        "schema_version": "0.1",
        "id": cohort_id,
        "title": title,
        "description": description,
        "stage": stage,
        "minimum_final_tasks": 5,
        "required_families": list(_FAMILIES),
        "taxonomy_frozen_before_outcomes": True,
        "authority": dict(_AUTHORITY),
        "tasks": tasks,
    }
    if extensions is not None:
        doc["extensions"] = dict(extensions)
    doc["definition_digest"] = definition_digest(doc)
    return doc


# --------------------------------------------------------------------------- bundles


@dataclass(frozen=True)
class BundleSpec:
    """One result bundle: what the worker produced and what it claims."""

    folder: str  # repository-relative bundle folder
    spec: TaskSpec
    attempt: int
    patch: bytes
    summary: str
    stdout: str
    expected: str | None  # "support" | "reject"; None for a bundle the ledger must refuse
    declared_digest: str | None = None  # a forged patch digest, when set
    status: str = "succeeded"
    stderr: str = ""
    worker: str = "example-worker/agent-a"


def manifest_doc(bundle: BundleSpec) -> dict[str, Any]:
    spec = bundle.spec
    short = spec.task_id.split("/", 1)[1]
    return {
        "schema_version": "0.1",
        "id": f"{spec.task_prefix}/attempts/{short}/attempt-{bundle.attempt}",
        "work_unit_id": spec.work_unit_id,
        "work_unit_version": 1,
        "attempt": bundle.attempt,
        "worker": {
            "id": bundle.worker,
            "type": "agent",
            "adapter": "example-cli-agent",
            "adapter_version": "1.4.2",
        },
        "status": bundle.status,
        "started_at": f"2026-02-0{bundle.attempt}T09:00:00Z",
        "finished_at": f"2026-02-0{bundle.attempt}T09:07:30Z",
        "produced_artifacts": [
            {
                "id": CANDIDATE_ID,
                "type": "patch",
                "locator": "changes.patch",
                "digest": bundle.declared_digest or _sha(bundle.patch),
                "media_type": "text/x-diff",
            }
        ],
        "logs": [
            {"type": "stdout", "locator": "stdout.txt", "digest": _sha(bundle.stdout.encode())},
            {"type": "stderr", "locator": "stderr.txt", "digest": _sha(bundle.stderr.encode())},
        ],
        "metrics": {"files_changed": bundle.patch.count(b"diff --git ")},
        "resources": {"wall_seconds": 450, "tokens": 18250},
        "self_report": {"summary": bundle.summary, "claims": [bundle.summary]},
        "provenance": {
            "work_unit_digest": canonical_digest(work_unit_doc(spec)),
            "source_revision": spec.repo.revision,
            "environment": {"platform": "linux-x86_64", "python": "3.11"},
        },
        "verification_request": {
            "expected_validator_ids": list(VALIDATOR_IDS),
            "evidence_artifact_ids": [CANDIDATE_ID],
        },
    }


def bundle_files(bundle: BundleSpec) -> dict[str, bytes]:
    return {
        f"{bundle.folder}/result-manifest.json": pretty(manifest_doc(bundle)),
        f"{bundle.folder}/changes.patch": bundle.patch,
        f"{bundle.folder}/stdout.txt": bundle.stdout.encode(),
        f"{bundle.folder}/stderr.txt": bundle.stderr.encode(),
    }


# --------------------------------------------------------------------------- the demo cohort

_DEMO_FORBIDDEN: Final = (".github/**", "SECURITY.md", "pyproject.toml")


def _demo(number: str, slug: str, **kwargs: Any) -> TaskSpec:
    return TaskSpec(
        number=number,
        slug=slug,
        task_prefix="demo",
        work_unit_id=f"inventory-api/{number}-{slug}",
        repo=INVENTORY,
        forbidden=_DEMO_FORBIDDEN,
        **kwargs,
    )


README_MARKER: Final = "<!-- inventory-api: support-policy v2 -->"
DOCS_CONTRACT_LINE: Final = (
    "Responses never hold more than 100 items; a larger `page_size` is clamped to 100."
)

DEMO_TASKS: Final = (
    _demo(
        "001",
        "readme-marker",
        family="documentation_contract",
        difficulty="trivial",
        split="development",
        kind="documentation",
        objective=(
            "Add the support-policy marker line to the Support section of README.md, so the"
            " docs site inserts the current support policy there."
        ),
        allowed=("README.md",),
        plan_version="0.2",
        semantic={"required_added_text": [README_MARKER]},
        negative=(
            "A line that carries the marker plus other text is not the marker line.",
            "correctness",
        ),
    ),
    _demo(
        "002",
        "yaml-safe-load",
        family="bug_fix",
        difficulty="small",
        split="held_out",
        kind="coding",
        objective=(
            "load_config parses the configuration with yaml.load and the full Loader, which can"
            " construct arbitrary Python objects; parse it with yaml.safe_load instead."
        ),
        allowed=("src/inventory/config.py", "tests/**"),
        plan_version="0.4",
        semantic={
            "required_added_substrings": ["yaml.safe_load("],
            "required_removed_substrings": ["yaml.load("],
        },
        negative=(
            "A patch that mentions yaml.safe_load( but keeps the yaml.load( call is rejected.",
            "security",
        ),
    ),
    _demo(
        "003",
        "timeout-default",
        family="bounded_feature",
        difficulty="trivial",
        split="development",
        kind="coding",
        objective=(
            "Give upstream HTTP requests a default timeout of 30 seconds: set"
            " request_timeout_seconds in config/defaults.yaml (0 currently disables it)."
        ),
        allowed=("config/defaults.yaml", "docs/**"),
        plan_version="0.3",
        semantic={"required_added_substrings": ["request_timeout_seconds: 30"]},
        negative=(
            "A bundle whose declared patch digest does not match the patch bytes is rejected.",
            "provenance",
        ),
    ),
    _demo(
        "004",
        "pagination-test",
        family="test_failure",
        difficulty="small",
        split="held_out",
        kind="testing",
        objective=(
            "Add a regression test showing that the last page of a 100-item listing with"
            " page_size 50 holds items 50-99 and is never empty."
        ),
        allowed=("tests/**",),
        plan_version="0.3",
        semantic={"required_added_substrings": ["def test_last_page_is_not_empty("]},
        negative=(
            "A patch that also edits CI so failing tests pass is out of scope.",
            "scope",
        ),
    ),
    _demo(
        "005",
        "query-parser-rename",
        family="refactor",
        difficulty="small",
        split="development",
        kind="coding",
        objective=(
            "Rename the private helper _parse_qs in src/inventory/query.py to the public"
            " parse_query and update its caller in src/inventory/server.py; no behaviour change."
        ),
        allowed=("src/inventory/query.py", "src/inventory/server.py"),
        plan_version="0.4",
        semantic={
            "required_added_substrings": ["def parse_query("],
            "required_removed_substrings": ["def _parse_qs("],
        },
        negative=(
            "Renaming the definition but leaving a caller on the old name breaks the import.",
            "regression",
        ),
    ),
    _demo(
        "006",
        "api-docs-contract",
        family="documentation_contract",
        difficulty="trivial",
        split="held_out",
        kind="documentation",
        objective=(
            "State the page-size contract in docs/api.md under GET /items, as this exact line:"
            f" {DOCS_CONTRACT_LINE}"
        ),
        allowed=("docs/**",),
        plan_version="0.2",
        semantic={"required_added_text": [DOCS_CONTRACT_LINE]},
        negative=(
            "A candidate that is not a valid Git unified diff is rejected, whatever it says.",
            "correctness",
        ),
    ),
)


def _demo_spec(slug: str) -> TaskSpec:
    return next(spec for spec in DEMO_TASKS if spec.slug == slug)


_PAGINATION_TEST: Final = (
    '"""Regression test: the last page of a listing is never empty."""\n'
    "\n"
    "from inventory.pagination import paginate\n"
    "\n"
    "\n"
    "def test_last_page_is_not_empty() -> None:\n"
    "    items = list(range(100))\n"
    "    pages = list(paginate(items, page_size=50))\n"
    "    assert len(pages) == 2\n"
    "    assert pages[-1] == list(range(50, 100))\n"
)


def _demo_bundles() -> list[BundleSpec]:
    repo = INVENTORY
    base = f"{FIXTURES_DIR}/bundles"

    def bundle(slug: str, attempt: int, patch: bytes, expected: str, **kw: Any) -> BundleSpec:
        return BundleSpec(
            folder=f"{base}/{slug}/attempt-{attempt}",
            spec=_demo_spec(slug),
            attempt=attempt,
            patch=patch,
            expected=expected,
            **kw,
        )

    support_heading = ("## Support\n\n", f"## Support\n\n{README_MARKER}\n\n")
    marker_good = make_patch([_modify(repo, "README.md", support_heading)])
    marker_extra = make_patch(
        [
            _modify(
                repo,
                "README.md",
                ("## Support\n\n", f"## Support\n\n{README_MARKER} (see SUPPORT.md)\n\n"),
            )
        ]
    )
    safe_load = make_patch(
        [
            _modify(
                repo,
                "src/inventory/config.py",
                (
                    "        data = yaml.load(handle, Loader=yaml.Loader)\n",
                    "        data = yaml.safe_load(handle)\n",
                ),
            )
        ]
    )
    safe_load_decoy = make_patch(
        [
            _modify(
                repo,
                "src/inventory/config.py",
                (
                    "        data = yaml.load(handle, Loader=yaml.Loader)\n",
                    "        # TODO: switch to yaml.safe_load(handle) once callers are audited\n"
                    "        data = yaml.load(handle, Loader=yaml.Loader)\n",
                ),
            )
        ]
    )
    timeout_old = "request_timeout_seconds: 0  # 0 disables the timeout\n"
    timeout = make_patch(
        [
            _modify(
                repo,
                "config/defaults.yaml",
                (timeout_old, "request_timeout_seconds: 30  # upstream calls give up after 30 s\n"),
            )
        ]
    )
    # The digest the worker declared belongs to an earlier draft, not to the bytes it shipped.
    timeout_draft = make_patch(
        [
            _modify(
                repo,
                "config/defaults.yaml",
                (timeout_old, "request_timeout_seconds: 60\n"),
            )
        ]
    )
    new_test = Change("tests/test_pagination.py", None, _PAGINATION_TEST)
    pagination = make_patch([new_test])
    pagination_ci = make_patch(
        [
            _modify(
                repo,
                ".github/workflows/ci.yml",
                ("      - run: pytest -q\n", "      - run: pytest -q || true\n"),
            ),
            new_test,
        ]
    )
    rename = make_patch(
        [
            _modify(repo, "src/inventory/query.py", ("def _parse_qs(", "def parse_query(")),
            _modify(
                repo,
                "src/inventory/server.py",
                ("import _parse_qs\n", "import parse_query\n"),
                ("params = _parse_qs(", "params = parse_query("),
            ),
        ]
    )
    docs_old = "| page_size | items per page (default 50) |\n"
    docs_contract = make_patch(
        [_modify(repo, "docs/api.md", (docs_old, f"{docs_old}\n{DOCS_CONTRACT_LINE}\n"))]
    )
    # A plain ``diff -u`` (no ``diff --git`` header): not the strict Git format the plan names.
    docs_plain = b"".join(
        line.encode()
        for line in difflib.unified_diff(
            repo.files["docs/api.md"].splitlines(keepends=True),
            (repo.files["docs/api.md"] + f"\n{DOCS_CONTRACT_LINE}\n").splitlines(keepends=True),
            fromfile="docs/api.md.orig",
            tofile="docs/api.md",
        )
    )
    return [
        bundle(
            "readme-marker",
            1,
            marker_good,
            "support",
            summary="Added the support-policy marker line under ## Support.",
            stdout="edited README.md\nmarkdownlint README.md: ok\n",
        ),
        bundle(
            "readme-marker",
            2,
            marker_extra,
            "reject",
            summary="Added the marker with a pointer to SUPPORT.md on the same line.",
            stdout="edited README.md\n",
        ),
        bundle(
            "yaml-safe-load",
            1,
            safe_load,
            "support",
            summary="Replaced yaml.load with yaml.safe_load in load_config.",
            stdout="edited src/inventory/config.py\npytest -q tests/test_config.py: 4 passed\n",
        ),
        bundle(
            "yaml-safe-load",
            2,
            safe_load_decoy,
            "reject",
            summary="Switched configuration parsing to yaml.safe_load.",
            stdout="edited src/inventory/config.py\n",
        ),
        bundle(
            "timeout-default",
            1,
            timeout,
            "support",
            summary="Default request timeout is now 30 seconds.",
            stdout="edited config/defaults.yaml\n",
        ),
        bundle(
            "timeout-default",
            2,
            timeout,
            "reject",
            summary="Default request timeout is now 30 seconds.",
            stdout="edited config/defaults.yaml\n",
            declared_digest=_sha(timeout_draft),
        ),
        bundle(
            "pagination-test",
            1,
            pagination,
            "support",
            summary="Added tests/test_pagination.py with test_last_page_is_not_empty.",
            stdout=(
                "created tests/test_pagination.py\npytest -q tests/test_pagination.py: 1 passed\n"
            ),
        ),
        bundle(
            "pagination-test",
            2,
            pagination_ci,
            "reject",
            summary="Added the pagination test; made CI tolerant of flaky tests.",
            stdout="created tests/test_pagination.py\nedited .github/workflows/ci.yml\n",
            stderr="pytest -q: 1 failed (test_last_page_is_not_empty)\n",
        ),
        bundle(
            "query-parser-rename",
            1,
            rename,
            "support",
            summary="Renamed _parse_qs to parse_query and updated server.py.",
            stdout="edited src/inventory/query.py\nedited src/inventory/server.py\n",
        ),
        bundle(
            "api-docs-contract",
            1,
            docs_contract,
            "support",
            summary="Documented the 100-item page-size clamp in docs/api.md.",
            stdout="edited docs/api.md\n",
        ),
        bundle(
            "api-docs-contract",
            2,
            docs_plain,
            "reject",
            summary="Documented the 100-item page-size clamp in docs/api.md.",
            stdout="diff -u docs/api.md.orig docs/api.md > changes.patch\n",
        ),
    ]


# --------------------------------------------------------------------------- phase B2 pilot

_PILOT_FORBIDDEN: Final = (".github/**", "benchmarks/**", "pyproject.toml")
_PILOT_EXCLUSION: Final = (
    "Frozen v0.2 plan holds a fragment, but verifier 0.1.1 requires whole added lines; the"
    " task is excluded before any outcome rather than editing the frozen plan."
)
OBSERVED_SOLUTION_PR: Final = 42
OBSERVED_MERGE_COMMIT: Final = _revision("acme/benchkit PR 42 merge")
SUCCESSOR_ISSUE: Final = 57


@dataclass(frozen=True)
class B2Task:
    """A phase B2 task: its WorkUnit is shared by the pilot and (for 002-005) the successor."""

    number: str
    slug: str
    family: str
    difficulty: str
    kind: str
    objective: str
    allowed: tuple[str, ...]
    negative: tuple[str, str]
    pilot_fragments: tuple[str, ...]  # the v0.2 required_added_text that burned the pilot
    exclusion: str = _PILOT_EXCLUSION


B2_TASKS: Final = (
    B2Task(
        "001",
        "manifest-path-boundary",
        "bug_fix",
        "small",
        "coding",
        "benchkit validate must refuse an absolute or '..' --manifest path instead of reading a"
        " file outside the repository.",
        ("src/benchkit/cli.py", "tests/**"),
        ("An absolute or traversal --manifest path must be refused, not read.", "security"),
        ("resolve_inside_root(args.manifest",),
        exclusion=(
            f"Its solution was merged in public (PR #{OBSERVED_SOLUTION_PR}) and exposed that the"
            " frozen v0.2 plan holds a fragment while verifier 0.1.1 checks whole added lines;"
            " a rejection here would not say anything about the candidate."
        ),
    ),
    B2Task(
        "002",
        "frozen-digest-test",
        "test_failure",
        "small",
        "testing",
        "Add a regression test: validating a frozen manifest without definition_digest raises"
        " ManifestError.",
        ("tests/**",),
        ("A frozen manifest without definition_digest must not validate.", "regression"),
        ("def test_frozen_manifest_requires_digest",),
    ),
    B2Task(
        "003",
        "digest-json-output",
        "bounded_feature",
        "small",
        "coding",
        'Add a --json flag to `benchkit digest` that prints {"definition_digest": ...}.',
        ("src/benchkit/cli.py", "tests/**"),
        ("The JSON output must not include outcome or evidence fields.", "correctness"),
        ('"--json"',),
    ),
    B2Task(
        "004",
        "safe-loader-refactor",
        "refactor",
        "small",
        "coding",
        "Make cmd_digest read the manifest through load_manifest, as cmd_validate does, instead"
        " of its own json.load.",
        ("src/benchkit/cli.py",),
        ("validate and digest must not diverge in how they read a manifest.", "regression"),
        ("load_manifest(Path(args.manifest))",),
    ),
    B2Task(
        "005",
        "freeze-checklist",
        "documentation_contract",
        "trivial",
        "documentation",
        "Write docs/freeze-checklist.md: the steps before a cohort is frozen, and that a"
        " supported result grants no merge authority.",
        ("docs/**",),
        ("The checklist must not present verifier support as merge authority.", "correctness"),
        ("no merge authority",),
    ),
)


def _b2_work_unit_spec(task: B2Task, **overrides: Any) -> TaskSpec:
    values: dict[str, Any] = {
        "number": task.number,
        "slug": task.slug,
        "task_prefix": "phase-b2-pilot",
        "work_unit_id": f"benchkit/{task.number}-{task.slug}",
        "repo": BENCHKIT,
        "family": task.family,
        "difficulty": task.difficulty,
        "split": "pilot",
        "kind": task.kind,
        "objective": task.objective,
        "allowed": task.allowed,
        "forbidden": _PILOT_FORBIDDEN,
        "plan_version": "0.2",
        "semantic": {"required_added_text": list(task.pilot_fragments)},
        "negative": task.negative,
        "evidence": {"status": "excluded", "attempts": [], "exclusion_reason": task.exclusion},
        "plan_suffix": "evaluator-v0.2",
    }
    values.update(overrides)
    return TaskSpec(**values)


PILOT_TASKS: Final = tuple(_b2_work_unit_spec(task) for task in B2_TASKS)

# Successor: the pilot's unobserved WorkUnits 002-005 (identical documents) under new plans.
_SUCCESSOR_PLANS: Final[Mapping[str, tuple[str, Mapping[str, Sequence[str]], str]]] = {
    "002": (
        "0.3",
        {
            "required_added_substrings": [
                "def test_frozen_manifest_requires_digest(",
                "pytest.raises(ManifestError",
            ]
        },
        "public",
    ),
    "003": ("0.3", {"required_added_substrings": ['digest.add_argument("--json"']}, "public"),
    "004": (
        "0.4",
        {
            "required_added_substrings": ["manifest = load_manifest(Path(args.manifest))"],
            "required_removed_substrings": ["json.load(handle)"],
        },
        "hidden",
    ),
    "005": (
        "0.3",
        {"required_added_substrings": ["grants no merge authority", "benchkit digest"]},
        "public",
    ),
}


def _successor_specs() -> tuple[TaskSpec, ...]:
    specs = [
        TaskSpec(
            number="001",
            slug="cached-report-json",
            task_prefix="phase-b2-successor",
            work_unit_id="benchkit/001-cached-report-json",
            repo=BENCHKIT,
            family="bug_fix",
            difficulty="small",
            split="held_out",
            kind="coding",
            objective=(
                "read_cached_report unpickles files from the cache folder, which runs code an"
                " attacker can plant there; store and read cached reports as JSON instead."
            ),
            allowed=("src/benchkit/report.py", "tests/**"),
            forbidden=_PILOT_FORBIDDEN,
            plan_version="0.4",
            semantic={
                "required_added_substrings": ["json.load("],
                "required_removed_substrings": ["pickle.load("],
            },
            negative=(
                "A patch that adds json.load( but keeps the pickle.load( call is rejected.",
                "security",
            ),
            plan_suffix="evaluator-v0.4",
        )
    ]
    for task in B2_TASKS[1:]:
        version, semantic, visibility = _SUCCESSOR_PLANS[task.number]
        specs.append(
            _b2_work_unit_spec(
                task,
                task_prefix="phase-b2-successor",
                split="held_out",
                plan_version=version,
                semantic=semantic,
                visibility=visibility,
                evidence={"status": "pending", "attempts": []},
                plan_suffix=f"evaluator-v{version}",
            )
        )
    return tuple(specs)


SUCCESSOR_TASKS: Final = _successor_specs()


def _pilot_bundles() -> list[BundleSpec]:
    """The publicly merged solution of pilot Task 001 (the observation that burned it)."""
    helper = (
        "def resolve_inside_root(raw: str, root: Path) -> Path:\n"
        '    """The manifest path under ``root``; absolute and \'..\' paths are refused."""\n'
        "    candidate = Path(raw)\n"
        '    if candidate.is_absolute() or ".." in candidate.parts:\n'
        '        raise SystemExit(f"benchkit: {raw}: manifest path must stay inside {root}")\n'
        "    return root / candidate\n"
        "\n"
        "\n"
    )
    patch = make_patch(
        [
            _modify(
                BENCHKIT,
                "src/benchkit/cli.py",
                ("def cmd_validate(", helper + "def cmd_validate("),
                (
                    "    manifest = load_manifest(Path(args.manifest))\n    print(f",
                    "    manifest = load_manifest(resolve_inside_root(args.manifest, Path.cwd()))\n"
                    "    print(f",
                ),
            )
        ]
    )
    spec = PILOT_TASKS[0]
    return [
        BundleSpec(
            folder=f"{FIXTURES_DIR}/pilot-bundles/{spec.slug}/attempt-1",
            spec=spec,
            attempt=1,
            patch=patch,
            expected=None,
            summary="validate refuses absolute and '..' manifest paths (merged as PR #42).",
            stdout="edited src/benchkit/cli.py\npytest -q: 12 passed\n",
        )
    ]


def _successor_bundles() -> list[BundleSpec]:
    base = f"{FIXTURES_DIR}/successor-bundles"
    by_number = {spec.number: spec for spec in SUCCESSOR_TASKS}
    report_json = make_patch(
        [
            _modify(
                BENCHKIT,
                "src/benchkit/report.py",
                ("import pickle\n", "import json\n"),
                ('path.open("rb")', 'path.open("r", encoding="utf-8")'),
                ("report = pickle.load(handle)", "report = json.load(handle)"),
            )
        ]
    )
    digest_json = make_patch(
        [
            _modify(
                BENCHKIT,
                "src/benchkit/cli.py",
                (
                    "    print(definition_digest(manifest))\n",
                    "    digest = definition_digest(manifest)\n"
                    "    if args.json:\n"
                    '        print(json.dumps({"definition_digest": digest}))\n'
                    "    else:\n"
                    "        print(digest)\n",
                ),
                (
                    '    digest.add_argument("manifest")\n',
                    '    digest.add_argument("manifest")\n'
                    '    digest.add_argument("--json", action="store_true", help="print JSON")\n',
                ),
            )
        ]
    )
    return [
        BundleSpec(
            folder=f"{base}/{by_number['001'].slug}/attempt-1",
            spec=by_number["001"],
            attempt=1,
            patch=report_json,
            expected="support",
            summary="Cached reports are read with json.load; pickle is gone.",
            stdout="edited src/benchkit/report.py\npytest -q tests/test_report.py: 3 passed\n",
            worker="example-worker/agent-b",
        ),
        BundleSpec(
            folder=f"{base}/{by_number['003'].slug}/attempt-1",
            spec=by_number["003"],
            attempt=1,
            patch=digest_json,
            expected="support",
            summary='benchkit digest --json prints {"definition_digest": ...}.',
            stdout="edited src/benchkit/cli.py\n",
            worker="example-worker/agent-b",
        ),
    ]


# --------------------------------------------------------------------------- all files


def _wu_path(directory: str, spec: TaskSpec) -> str:
    return f"{directory}/work-units/{spec.file_stem}.work-unit.json"


def _plan_path(directory: str, spec: TaskSpec) -> str:
    return f"{directory}/evaluators/{spec.file_stem}.evaluator-plan.json"


def _cohort_files() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    demo_tasks = []
    for spec in DEMO_TASKS:
        wu_path, plan_path = _wu_path(DEMO_DIR, spec), _plan_path(DEMO_DIR, spec)
        files[wu_path] = pretty(work_unit_doc(spec))
        files[plan_path] = pretty(plan_doc(spec))
        demo_tasks.append(cohort_task(spec, work_unit_path=wu_path, plan_path=plan_path))
    files[f"{DEMO_DIR}/cohort.json"] = pretty(
        cohort_doc(
            cohort_id=DEMO_COHORT_ID,
            title="ledger demo: six inventory-api tasks over plan versions 0.2, 0.3 and 0.4",
            description=(
                "Example cohort frozen before any outcome: whole-line (0.2), added-substring"
                " (0.3) and added+removed transition (0.4) plans; result bundles under"
                " fixtures/demo/bundles."
            ),
            stage="frozen",
            tasks=demo_tasks,
        )
    )

    pilot_tasks = []
    for spec in PILOT_TASKS:
        wu_path, plan_path = _wu_path(PILOT_DIR, spec), _plan_path(PILOT_DIR, spec)
        files[wu_path] = pretty(work_unit_doc(spec))
        files[plan_path] = pretty(plan_doc(spec))
        pilot_tasks.append(cohort_task(spec, work_unit_path=wu_path, plan_path=plan_path))
    files[f"{PILOT_DIR}/cohort.json"] = pretty(
        cohort_doc(
            cohort_id=PILOT_COHORT_ID,
            title="benchkit phase B2 pilot (burned)",
            description=(
                "Burned five-task pilot. Its definition stays as frozen; its v0.2 plans hold"
                " fragments while verifier 0.1.1 requires whole added lines, and Task 001 was"
                " solved in public, so every outcome is excluded."
            ),
            stage="burned",
            tasks=pilot_tasks,
            extensions={
                "org.idkmesh.phase_b2": {
                    "note": "Engineering bootstrap, not a statistical-power claim.",
                    "burn": {
                        "reason": (
                            "Frozen v0.2 evaluator plans encoded fragments while deterministic"
                            " patch verifier 0.1.1 requires exact whole added lines."
                        ),
                        "observed_task": PILOT_TASKS[0].task_id,
                        "observed_solution_pr": OBSERVED_SOLUTION_PR,
                        "observed_solution_merge_commit": OBSERVED_MERGE_COMMIT,
                        "successor_issue": SUCCESSOR_ISSUE,
                    },
                }
            },
        )
    )

    pilot_wu_paths = {spec.work_unit_id: _wu_path(PILOT_DIR, spec) for spec in PILOT_TASKS}
    successor_tasks = []
    for spec in SUCCESSOR_TASKS:
        # Reused WorkUnits are referenced where the pilot keeps them: same file, same digest.
        if spec.work_unit_id in pilot_wu_paths:
            wu_path = pilot_wu_paths[spec.work_unit_id]
        else:
            wu_path = _wu_path(SUCCESSOR_DIR, spec)
            files[wu_path] = pretty(work_unit_doc(spec))
        public_path: str | None = None
        if spec.visibility == "public":
            public_path = _plan_path(SUCCESSOR_DIR, spec)
            files[public_path] = pretty(plan_doc(spec))
        else:
            files[f"{HIDDEN_PLANS_DIR}/{spec.file_stem}.evaluator-plan.json"] = pretty(
                plan_doc(spec)
            )
        successor_tasks.append(cohort_task(spec, work_unit_path=wu_path, plan_path=public_path))
    files[f"{SUCCESSOR_DIR}/cohort.json"] = pretty(
        cohort_doc(
            cohort_id=SUCCESSOR_COHORT_ID,
            title="benchkit phase B2 successor: held-out tasks under v0.3/v0.4 plans",
            description=(
                "Successor to the burned pilot: its unobserved WorkUnits 002-005 unchanged under"
                " new, explicitly versioned v0.3/v0.4 plans, and a fresh Task 001 (the pilot's"
                " Task 001 was solved in public and is never held out again). Task 004's plan"
                " is hidden: freeze with --hidden-plans cohorts/phase-b2-successor-hidden-plans."
            ),
            stage="frozen",
            tasks=successor_tasks,
            extensions={
                "org.idkmesh.phase_b2": {
                    "predecessor": PILOT_COHORT_ID,
                    "successor_issue": SUCCESSOR_ISSUE,
                }
            },
        )
    )
    return files


ALL_BUNDLES: Final = (*_demo_bundles(), *_pilot_bundles(), *_successor_bundles())


def generate() -> dict[str, bytes]:
    """Repository-relative path -> exact bytes of every generated file, sorted by path."""
    files = _cohort_files()
    expected: dict[str, str] = {}
    for bundle in ALL_BUNDLES:
        files.update(bundle_files(bundle))
        if bundle.expected is not None:
            expected[bundle.folder] = bundle.expected
    files[EXPECTED_FILE] = pretty(dict(sorted(expected.items())))
    for repo in (INVENTORY, BENCHKIT):
        for path, text in repo.files.items():
            files[f"{FIXTURES_DIR}/base/{repo.name}/{path}"] = text.encode()
    return dict(sorted(files.items()))


def _existing(root: Path) -> set[str]:
    found: set[str] = set()
    for directory in OWNED_DIRS:
        base = root / directory
        if base.is_dir():
            found.update(
                path.relative_to(root).as_posix()
                for path in base.rglob("*")
                if path.is_file() or path.is_symlink()
            )
    return found


def drifted(root: Path) -> list[str]:
    """Files under ``root`` that differ from ``generate()``: missing, changed or unexpected."""
    files = generate()
    problems: list[str] = []
    for relative, data in files.items():
        target = root / relative
        if target.is_symlink() or not target.is_file():
            problems.append(f"missing: {relative}")
        elif target.read_bytes() != data:
            problems.append(f"changed: {relative}")
    for relative in sorted(_existing(root) - set(files)):
        problems.append(f"unexpected: {relative}")
    return problems


def write(root: Path) -> list[str]:
    """Write every generated file under ``root`` and remove stale files in the owned folders."""
    files = generate()
    for relative in sorted(_existing(root) - set(files)):
        (root / relative).unlink()
    for relative, data in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
    return list(files)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.examples",
        description="Write or check the example cohorts and result bundles.",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="ROOT", type=Path, help="write every file under ROOT")
    group.add_argument("--check", metavar="ROOT", type=Path, help="exit 1 if any file drifted")
    args = parser.parse_args(argv)
    if args.write is not None:
        written = write(args.write)
        sys.stdout.write(f"wrote {len(written)} files under {args.write}\n")
        return 0
    problems = drifted(args.check)
    for line in problems:
        sys.stdout.write(line + "\n")
    if problems:
        sys.stdout.write(
            f"{len(problems)} example files drifted; run python -m tools.examples --write .\n"
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "ALL_BUNDLES",
    "BENCHKIT",
    "DEMO_COHORT_ID",
    "DEMO_TASKS",
    "EXPECTED_FILE",
    "HIDDEN_PLANS_DIR",
    "INVENTORY",
    "PILOT_COHORT_ID",
    "PILOT_TASKS",
    "SUCCESSOR_COHORT_ID",
    "SUCCESSOR_TASKS",
    "BundleSpec",
    "Change",
    "TaskSpec",
    "drifted",
    "generate",
    "main",
    "make_patch",
    "write",
]
