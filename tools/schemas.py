"""Generate the JSON Schema (2020-12) files in ``schemas/`` from the contract Structs.

``python -m tools.schemas`` writes one file per contract and version
(``schemas/<name>-v<version>.schema.json``); ``python -m tools.schemas --check`` writes nothing
and exits 1 listing every file that differs from what the code generates (or that no registry
entry generates). Output is sorted, indented JSON with a trailing newline, so it is byte-stable.

The Structs are the authority; the files are a readable, tool-friendly projection of them. Rules
a Struct enforces in code (``uniqueItems``, ``if``/``then``) are carried over through
``Meta(extra_json_schema=...)`` and ``ContractStruct.json_schema_extra``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from ledger.cli.shapes import common as shapes_common
from ledger.cli.shapes import operations as shapes_operations
from ledger.cli.shapes import reading as shapes_reading
from ledger.cli.shapes import transparency as shapes_transparency
from ledger.documents.cohort import BenchmarkCohort, BurnNotice
from ledger.format.entries import EntryBody
from ledger.format.payloads import PAYLOADS
from ledger.format.trust import TrustFile
from ledger.interop.attest import AttestationBundle
from verifiers.contracts import (
    ContractStruct,
    EvaluatorPlanV01,
    EvaluatorPlanV02,
    EvaluatorPlanV03,
    EvaluatorPlanV04,
    EvaluatorPlanV05,
    ResultManifest,
    VerificationResult,
    WorkUnit,
)

JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
ID_PREFIX: Final = "urn:evidence-ledger:schema:"
DEFAULT_DIR: Final = Path(__file__).resolve().parents[1] / "schemas"


class ContractSchema(NamedTuple):
    """One generated schema file: contract ``name`` at ``version``, modelled by ``struct``."""

    name: str
    version: str
    struct: type[msgspec.Struct]
    title: str
    description: str

    @property
    def filename(self) -> str:
        return f"{self.name}-v{self.version}.schema.json"


# The registry: add an entry here (e.g. the ledger's entry-body Structs) to get a schema file.
CONTRACTS: Final[tuple[ContractSchema, ...]] = (
    ContractSchema(
        "work-unit",
        "0.2",
        WorkUnit,
        "WorkUnit v0.2",
        "A task frozen before anyone works on it: objective, scope, permissions, validators, "
        "budget and provenance. Accepts both reference budget shapes.",
    ),
    ContractSchema(
        "result-manifest",
        "0.1",
        ResultManifest,
        "ResultManifest v0.1",
        "A worker's own, untrusted account of one attempt at a WorkUnit.",
    ),
    ContractSchema(
        "evaluator-plan",
        "0.1",
        EvaluatorPlanV01,
        "EvaluatorPlan v0.1",
        "Verifier-owned plan: exact-JSON backend (deterministic-json-verifier 0.1).",
    ),
    ContractSchema(
        "evaluator-plan",
        "0.2",
        EvaluatorPlanV02,
        "EvaluatorPlan v0.2",
        "Verifier-owned plan: unified diff, each required_added_text value equals one whole "
        "added line (deterministic-patch-verifier 0.1.1).",
    ),
    ContractSchema(
        "evaluator-plan",
        "0.3",
        EvaluatorPlanV03,
        "EvaluatorPlan v0.3",
        "Verifier-owned plan: unified diff, each required_added_substrings value is a "
        "substring of one added line (deterministic-patch-verifier 0.2.0).",
    ),
    ContractSchema(
        "evaluator-plan",
        "0.4",
        EvaluatorPlanV04,
        "EvaluatorPlan v0.4",
        "Verifier-owned plan: unified diff, added and removed line substrings "
        "(deterministic-patch-verifier 0.3.0).",
    ),
    ContractSchema(
        "evaluator-plan",
        "0.5",
        EvaluatorPlanV05,
        "EvaluatorPlan v0.5",
        "Verifier-owned behavioural plan: a v0.4 static gate, then verifier-owned tests run in a "
        "sandbox over the committed source snapshot (sandboxed-test-verifier 0.5.0).",
    ),
    ContractSchema(
        "verification-result",
        "0.1",
        VerificationResult,
        "VerificationResult v0.1",
        "An independent verifier's evidence and recommendation for one ResultManifest; "
        "decision support, never a merge decision.",
    ),
    ContractSchema(
        "benchmark-cohort",
        "0.1",
        BenchmarkCohort,
        "BenchmarkCohort v0.1",
        "A set of tasks frozen before any outcome is seen; definition_digest commits to its "
        "outcome-independent projection.",
    ),
    ContractSchema(
        "burn-notice",
        "0.1",
        BurnNotice,
        "BurnNotice v0.1",
        "Why a frozen cohort's outcomes are excluded forever, and which tasks were observed.",
    ),
    ContractSchema(
        "entry-body",
        "1",
        EntryBody,
        "Ledger entry body, format 1 or 2 (signed)",
        "The canonical JSON hashed into the chain (entry_hash = BLAKE3) and the Merkle tree "
        "(leaf = SHA-256(0x00 || body)); see LEDGER.md section 3.",
    ),
    *(
        ContractSchema(
            "entry-payload-" + kind.replace(".", "-"),
            "1",
            struct,
            f"Payload of a {kind} entry, format 1",
            f"The payload object of every {kind} entry; see LEDGER.md section 4.",
        )
        for kind, struct in sorted(PAYLOADS.items())
    ),
    ContractSchema(
        "trust",
        "1",
        TrustFile,
        "Trust file v1 (ledger.trust.json)",
        "What a ledger's readers and writers trust: its origin, the log's verifier key, the "
        "trusted writer keys, the witnesses (name, URL, cosigner key), the TSAs (URL, PEM "
        "roots) and the anchoring policy; see LEDGER.md section 7, 'The trust file and the "
        "anchoring policy'.",
    ),
    ContractSchema(
        "attestation-bundle",
        "1",
        AttestationBundle,
        "Attestation bundle v1 (one line of `ledger attest`)",
        "A DSSE envelope over an in-toto Statement v1 with a SLSA Verification Summary v1 "
        "predicate, and what ties it to the ledger without the file: the entry's inclusion "
        "proof, the checkpoint note and (unless the task is hidden) the VerificationResult; "
        "see LEDGER.md section 7, 'Attestations'.",
    ),
    # Every command's --json output (ledger/cli/shapes/): output-<command>-v1.schema.json.
    *(
        ContractSchema(f"output-{shape.name}", "1", shape.struct, shape.title, shape.description)
        for module in (shapes_common, shapes_operations, shapes_reading, shapes_transparency)
        for shape in module.SHAPES
    ),
)


def _apply_extras(name: str, schema: dict[str, Any], struct_types: dict[str, type[Any]]) -> None:
    struct = struct_types.get(name)
    if struct is not None and issubclass(struct, ContractStruct):
        schema.update(json.loads(json.dumps(struct.json_schema_extra)))
    schema.pop("title", None)


def _struct_types(root: type[msgspec.Struct]) -> dict[str, type[Any]]:
    """Every Struct type reachable from ``root``, by name (the names used as ``$defs`` keys)."""
    found: dict[str, type[Any]] = {}
    stack: list[Any] = [msgspec.inspect.type_info(root)]
    while stack:
        info = stack.pop()
        if isinstance(info, msgspec.inspect.StructType):
            if info.cls.__name__ in found:
                continue
            found[info.cls.__name__] = info.cls
            stack.extend(field.type for field in info.fields)
        elif isinstance(info, msgspec.inspect.UnionType):
            stack.extend(info.types)
        elif isinstance(info, msgspec.inspect.ListType | msgspec.inspect.DictType):
            stack.append(
                info.item_type if isinstance(info, msgspec.inspect.ListType) else info.value_type
            )
    return found


def generate(entry: ContractSchema) -> dict[str, Any]:
    """The JSON Schema document for one registry entry."""
    (_, components) = msgspec.json.schema_components([entry.struct], ref_template="#/$defs/{name}")
    types = _struct_types(entry.struct)
    for name, schema in components.items():
        _apply_extras(name, schema, types)
    root = components.pop(entry.struct.__name__)
    required = root.setdefault("required", [])
    if "schema_version" in root.get("properties", {}) and "schema_version" not in required:
        # A constructor default (VerificationResult) must not make the field optional on read.
        required.insert(0, "schema_version")
    root.get("properties", {}).get("schema_version", {}).pop("default", None)
    root.pop("description", None)  # the Struct's docstring: the registry's text is the one
    document: dict[str, Any] = {
        "$schema": JSON_SCHEMA_DIALECT,
        "$id": f"{ID_PREFIX}{entry.name}-v{entry.version}",
        "title": entry.title,
        "description": entry.description,
        **root,
    }
    if components:
        document["$defs"] = components
    return document


def render(entry: ContractSchema) -> str:
    """The exact text of one schema file."""
    return json.dumps(generate(entry), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def expected_files() -> dict[str, str]:
    """File name -> text for every registry entry."""
    files: dict[str, str] = {}
    for entry in CONTRACTS:
        if entry.filename in files:
            raise ValueError(f"two registry entries generate {entry.filename}")
        files[entry.filename] = render(entry)
    return files


def drifted(directory: Path) -> list[str]:
    """Names of files in ``directory`` that are missing, differ, or are not generated."""
    expected = expected_files()
    problems: list[str] = []
    for name, text in sorted(expected.items()):
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            problems.append(name)
    if directory.is_dir():
        for path in sorted(directory.glob("*.schema.json")):
            if path.name not in expected:
                problems.append(path.name)
    return problems


def write(directory: Path) -> list[str]:
    """Write every schema file that differs; return the names written."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for name, text in sorted(expected_files().items()):
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(name)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.schemas", description=__doc__)
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="schema folder")
    args = parser.parse_args(argv)
    if args.check:
        problems = drifted(args.dir)
        for name in problems:
            sys.stderr.write(f"drifted: {args.dir / name}\n")
        if problems:
            sys.stderr.write("run `python -m tools.schemas` to regenerate\n")
            return 1
        return 0
    for name in write(args.dir):
        sys.stderr.write(f"wrote {args.dir / name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
