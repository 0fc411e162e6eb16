"""The committed JSON Schema files are exactly what the Structs generate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import schemas

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"


def test_committed_schema_files_match_the_code() -> None:
    assert schemas.drifted(SCHEMA_DIR) == []


@pytest.mark.parametrize("entry", schemas.CONTRACTS, ids=lambda e: e.filename)
def test_schema_file_header(entry: schemas.ContractSchema) -> None:
    document = json.loads((SCHEMA_DIR / entry.filename).read_text("utf-8"))
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"].endswith(f"{entry.name}-v{entry.version}")
    assert document["title"] == entry.title
    assert document["description"] == entry.description  # the registry's, not a docstring
    assert document["additionalProperties"] is False
    if entry.name == "entry-body":
        # Ledger entries are versioned by ``format``; their payloads by the entry's format.
        assert "format" in document["required"]
    elif entry.name.startswith("output-"):
        # A command's output is versioned with the CLI contract (LEDGER.md section 11).
        assert document["properties"]
    elif entry.name == "attestation-bundle":
        # Versioned by its media type, as DSSE and in-toto documents are.
        assert "mediaType" in document["required"]
    elif not entry.name.startswith("entry-payload-"):
        assert "schema_version" in document["required"]


def test_check_reports_an_edited_file(tmp_path: Path) -> None:
    assert schemas.write(tmp_path)
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 0
    target = tmp_path / "work-unit-v0.2.schema.json"
    target.write_text(target.read_text("utf-8").replace('"minimum": 1', '"minimum": 0'), "utf-8")
    (tmp_path / "stale-v9.schema.json").write_text("{}\n", "utf-8")
    assert schemas.drifted(tmp_path) == ["work-unit-v0.2.schema.json", "stale-v9.schema.json"]
    assert schemas.main(["--check", "--dir", str(tmp_path)]) == 1


def test_output_is_stable_sorted_json_with_trailing_newline() -> None:
    for entry in schemas.CONTRACTS:
        text = schemas.render(entry)
        assert text.endswith("}\n")
        assert (
            text
            == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        )


def test_plan_schema_pins_adapter_version() -> None:
    document = json.loads((SCHEMA_DIR / "evaluator-plan-v0.2.schema.json").read_text("utf-8"))
    verifier = document["$defs"]["PlanVerifierV02"]["properties"]
    assert verifier["adapter_version"] == {"enum": ["0.1.1"]}
    assert document["properties"]["schema_version"] == {"enum": ["0.2"]}
