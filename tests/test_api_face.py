"""``ledger.api`` is a face, not a list (issue 31, item 2; docs/API.md): one typed result per
operation, the same type the command prints with ``--json`` and its output schema is generated
from; no process exit code in a library result; errors and their codes importable from it;
``Ledger`` one thing; paths one way; and a harness example that runs, in step with the page
that states what is stable."""

from __future__ import annotations

import inspect
import re
import runpy
import types
import typing
import warnings
from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers import REPO_DIR

from ledger import api
from tools.schemas import CONTRACTS

API_MD = REPO_DIR / "docs" / "API.md"
EXAMPLE = REPO_DIR / "docs" / "harness_example.py"
TASK = "test/cohort-a/task-000"

# Output shapes that still live in ledger/cli/shapes as a mirror of a library value (issue 31
# item 2, what is left): each moves to the library as its command's result type, and leaves
# this list; the test below fails if one has moved and is still listed.
STILL_MIRRORED = frozenset(
    {
        "output-freeze-dry-run", "output-lint", "output-seal", "output-digest",
        "output-new-cohort", "output-new-cohort-from-fixtures", "output-new-task",
        "output-rehearse", "output-remove-task", "output-bundle-pack", "output-log",
        "output-log-jsonl-line", "output-check-patch", "output-check-result",
        "output-browse", "output-report", "output-trust-init", "output-trust-add-witness",
        "output-trust-add-tsa", "output-trust-add-writer", "output-trust-anchor",
        "output-trust-show", "output-keygen",
        "output-checkpoint-witnessed", "output-attest",
        "output-check-attestation", "output-export", "output-export-line-header",
        "output-export-line-entry", "output-export-line-object", "output-witness-keygen",
        "output-witness-init", "output-witness-serve", "output-witness-evidence",
        "output-when",
    }
)  # fmt: skip

OUTPUTS = {c.name: c.struct for c in CONTRACTS if c.name.startswith("output-")}


@pytest.mark.parametrize("name", sorted(set(OUTPUTS) - STILL_MIRRORED))
def test_an_output_schema_is_generated_from_the_result_type_the_face_returns(name: str) -> None:
    """Before, 71 Structs in ledger/cli/shapes mirrored the library's results (``VerifyOutput``
    beside ``VerifyResult``, ``EarlierVerification`` twice): two types that could drift."""
    struct = OUTPUTS[name]
    assert getattr(api, struct.__name__, None) is struct, (name, struct)
    assert struct.__name__ in api.__all__
    assert not struct.__module__.startswith("ledger.cli"), (name, struct.__module__)


def test_the_list_of_shapes_still_mirrored_in_the_cli_is_exact() -> None:
    assert STILL_MIRRORED <= set(OUTPUTS)
    moved = {n for n in STILL_MIRRORED if not OUTPUTS[n].__module__.startswith("ledger.cli")}
    assert not moved, f"generated from the library now: drop from STILL_MIRRORED: {moved}"


def test_earlier_verification_is_defined_once() -> None:
    defined = [
        p.relative_to(REPO_DIR).as_posix()
        for p in (REPO_DIR / "ledger").rglob("*.py")
        if re.search(r"^class EarlierVerification\b", p.read_text(encoding="utf-8"), re.M)
    ]
    assert defined == ["ledger/state.py"]


def _face_types() -> list[type[Any]]:
    return [v for n in api.__all__ if isinstance(v := getattr(api, n), type)]


def test_no_library_result_carries_a_process_exit_code() -> None:
    """Before, ``VerifyResult.exit_code``, ``ResultCheck.exit_code`` and the rehearsal's made
    the library decide the process's exit; the CLI maps a result to its code in one place."""
    carrying = [t.__name__ for t in _face_types() if "exit_code" in dir(t)]
    assert set(carrying) <= {
        "LedgerError", "UsageError", "StoreError", "CommitError", "ProofInputError"
    }, carrying  # fmt: skip


def _annotation_words(struct: type[msgspec.Struct]) -> dict[str, Any]:
    return typing.get_type_hints(struct, include_extras=False)


def test_the_verify_result_is_typed_as_the_contract_not_a_dict() -> None:
    hints = _annotation_words(api.VerifyResult)
    assert hints["verification_result"] is api.VerificationResult
    assert hints["outcome"] == api.Outcome
    assert typing.get_args(api.Outcome) == api.OUTCOMES
    earlier = typing.get_args(hints["earlier"])
    assert api.EarlierVerification in earlier
    assert _annotation_words(api.EarlierVerification)["outcome"] == api.Outcome
    assert _annotation_words(api.AuditResult)["verdict"] == api.Verdict


def test_a_stored_outcome_that_is_no_outcome_word_is_not_reported_as_an_earlier_verdict() -> None:
    """``first_judgement`` reads a stored verification.recorded payload: an outcome that is not
    one of the four words (a ledger tampered with, which the audit reports) is not passed on
    typed as an ``Outcome``: no earlier verdict is named."""
    from ledger.state import first_judgement

    observation = {"role": "manifest", "locator": "m", "status": "ok", "size": 1, "sha256": "d"}

    def read(seq: int, outcome: str) -> Any:
        if seq == 5:
            return types.SimpleNamespace(
                kind="bundle.observed", seq=5, payload={"observations": [observation]}
            )
        payload = {"bundle_entry": 5, "cohort": "c", "task": "t", "outcome": outcome}
        return types.SimpleNamespace(kind="verification.recorded", seq=6, payload=payload)

    good = first_judgement([observation], lambda _d: 5, lambda s: read(s, "reject"))
    assert good is not None and good.outcome == "reject"
    bogus = first_judgement([observation], lambda _d: 5, lambda s: read(s, "merge-it"))
    assert bogus is None


def test_errors_and_their_document_come_from_the_face(tmp_path: Path) -> None:
    with pytest.raises(api.LedgerError) as refused:
        api.open_ledger(tmp_path / "missing.db")
    assert isinstance(refused.value, api.StoreError)
    document = api.ErrorDocument(error=api.ErrorDetail.of(refused.value))
    assert msgspec.to_builtins(document) == {
        "error": {"code": "ledger-not-found", "message": refused.value.message}
    }


def test_ledger_means_the_store_interface_and_the_sqlite_class_is_sqlite_store() -> None:
    """Before, ``Ledger`` was the SQLite class in ``ledger.store.sqlite`` and ``ledger.api``,
    and the store interface in sixteen modules (``Store as Ledger``)."""
    import ledger.store.sqlite as sqlite

    assert inspect.signature(api.open_ledger).return_annotation in ("Store", api.Store)
    assert issubclass(sqlite.SqliteStore, api.Store)
    with pytest.warns(DeprecationWarning, match="SqliteStore"):
        assert sqlite.Ledger is sqlite.SqliteStore
    with pytest.warns(DeprecationWarning, match="SqliteStore"):
        assert api.Ledger is sqlite.SqliteStore
    assert "Ledger" not in api.__all__


def test_a_primitive_left_the_face_and_still_resolves_with_a_warning() -> None:
    from ledger.tlog.witness import verify_cosignature

    with pytest.warns(DeprecationWarning, match="ledger.tlog.witness"):
        assert api.verify_cosignature is verify_cosignature
    with pytest.raises(AttributeError):
        _ = api.no_such_name


def test_the_face_takes_paths_one_way() -> None:
    """Paths were typed three ways (``Path``, ``str | os.PathLike[str]``, ``str | Path``)."""
    wrong: list[str] = []
    for name in api.__all__:
        value = getattr(api, name)
        if not inspect.isfunction(value):
            continue
        for parameter in inspect.signature(value).parameters.values():
            text = str(parameter.annotation)
            if re.search(r"\bPath\b", text) or "str | Path" in text:
                wrong.append(f"{name}({parameter.name}: {text})")
    assert not wrong, wrong


# -- the harness example and the page that states what is stable ---------------------------------


def test_the_harness_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = runpy.run_path(str(EXAMPLE))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the example uses no old name
        assert module["main"]([str(EXAMPLE), str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"ledger {tmp_path / 'ledger.db'}: created=True",
        "calibrated green=True; froze example/demo",
        "attempt-1: support (accept_candidate) at entry 4",
        "attempt-2: reject",
        "no-such-bundle: refused bundle-not-found",
        "refused: bundle-not-found",
        "audit: consistent, 0 violations",
        "proof of entry 4 in tree 7: valid=True",
    ]


def _example_names() -> set[str]:
    return set(re.findall(r"\bapi\.([A-Za-z_]\w*)", EXAMPLE.read_text(encoding="utf-8")))


def _stable_section() -> str:
    text = API_MD.read_text(encoding="utf-8")
    return text[text.index("## Stable names") : text.index("## What may change")]


def test_the_example_uses_only_names_the_page_calls_stable() -> None:
    stable = set(re.findall(r"`([A-Za-z_]\w*)`", _stable_section()))
    assert _example_names() <= stable, _example_names() - stable


def test_the_page_names_exactly_the_face() -> None:
    section = _stable_section()
    named = set(re.findall(r"`([A-Za-z_]\w*)`", section))
    assert named == set(api.__all__), (
        f"in __all__, not on the page: {set(api.__all__) - named};"
        f" on the page, not in __all__: {named - set(api.__all__)}"
    )


def test_the_trust_file_a_harness_gives_is_checked_and_named_in_each_result(
    tmp_path: Path,
) -> None:
    """As the commands do: a trust file of another ledger is refused before anything is
    written, and the one used is named in every verify result, single or batch (the CLI
    filled the field in itself, so a harness got ``None``)."""
    from commit_helpers import make_bundle, make_cohort

    from ledger.format.trust import encode_trust, new_trust

    db = tmp_path / "ledger.db"
    api.init_ledger(db, origin="test.example/face")
    ours, theirs = tmp_path / "ours.trust.json", tmp_path / "theirs.trust.json"
    ours.write_bytes(encode_trust(new_trust("test.example/face")))
    theirs.write_bytes(encode_trust(new_trust("test.example/another")))
    bundle = make_bundle(tmp_path, "good")
    with api.open_ledger(db) as ledger:
        api.calibrate(ledger)
        api.freeze(ledger, make_cohort(tmp_path), root=tmp_path)
        size = ledger.size()
        with pytest.raises(api.LedgerError) as refused:
            api.verify(ledger, bundle, task=TASK, trust=api.load_trust(theirs))
        assert refused.value.code == "trust-origin-mismatch" and ledger.size() == size
        loaded = api.load_trust(ours)
        one = api.verify(ledger, bundle, task=TASK, trust=loaded)
        [many] = list(api.verify_many(ledger, [bundle], task=TASK, trust=loaded))
    assert one.trust == loaded.source and loaded.source.how == "option"
    assert isinstance(many, api.VerifyResult) and many.trust == loaded.source
