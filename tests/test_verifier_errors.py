"""One error root in ``verifiers`` (``VerifierError``), wrapped by the ledger at one place.

A caller of ``verifiers`` catches one class and reads ``code`` and ``message``; a caller of
``ledger.api`` never sees a verifier exception, only a ``LedgerError`` with the same code and
message the CLI prints.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest
from commit_helpers import make_cohort

import verifiers
from ledger import api
from ledger.errors import LedgerError, UsageError
from ledger.store.sqlite import SqliteStore
from verifiers.bundle import BundleRootError, ReadPolicy, SnapshotReplayError, read_bundle
from verifiers.canonical import CanonicalFormError, canonical_bytes
from verifiers.errors import VerifierError, VerifierInternalError
from verifiers.runner import PlanBindingError


def _public_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(verifiers.__path__, "verifiers."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseException):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_public_verifier_exception_has_the_one_root() -> None:
    found = _public_exceptions()
    # The ones callers catch today must be among them (the walk found the modules).
    for cls in (
        BundleRootError,
        SnapshotReplayError,
        CanonicalFormError,
        PlanBindingError,
        VerifierInternalError,
    ):
        assert cls in found.values()
    strays = {name for name, cls in found.items() if not issubclass(cls, VerifierError)}
    assert strays == set()


def test_verifier_errors_keep_their_code_message_and_text() -> None:
    with pytest.raises(VerifierError) as canonical:
        canonical_bytes({"a": [float("nan")]})
    assert isinstance(canonical.value, CanonicalFormError)
    assert canonical.value.path == "/a/0"
    assert canonical.value.message == "NaN and infinities are not JSON"
    assert str(canonical.value) == "/a/0: NaN and infinities are not JSON"
    assert canonical.value.code == "value-not-canonical"
    binding = PlanBindingError("plan-binding-invalid", "the plan names another WorkUnit")
    assert str(binding) == "plan-binding-invalid: the plan names another WorkUnit"


def test_read_bundle_called_with_both_limits_raises_the_root_not_a_builtin(
    tmp_path: Path,
) -> None:
    with pytest.raises(VerifierInternalError) as info:
        read_bundle(tmp_path, limit_for=lambda _locator: 0, policy=ReadPolicy("x", 0, 0, 0, 0))
    assert info.value.code == "verifier-internal"
    assert str(info.value) == "read_bundle needs exactly one of limit_for and policy"


def test_missing_bundle_crosses_the_api_as_a_ledger_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    api.init_ledger(db, origin="test/errors")
    missing = tmp_path / "no-such-bundle"
    with api.open_ledger(db) as ledger:
        api.calibrate(ledger)
        api.freeze(ledger, make_cohort(tmp_path), root=tmp_path)
        with pytest.raises(LedgerError) as info:
            api.verify(ledger, missing, task="test/cohort-a/task-000")
    assert type(info.value) is UsageError and not isinstance(info.value, VerifierError)
    assert info.value.code == "bundle-not-found"
    assert info.value.message == f"bundle folder {missing} does not exist"
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_missing_cohort_folder_crosses_the_api_reworded_as_a_folder(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    api.init_ledger(db, origin="test/errors")
    missing = tmp_path / "no-such-cohort"
    with api.open_ledger(db) as ledger, pytest.raises(LedgerError) as info:
        api.freeze(ledger, missing, root=tmp_path)
    assert type(info.value) is UsageError and not isinstance(info.value, VerifierError)
    assert info.value.code == "folder-unusable"
    assert info.value.message == f"folder {missing} does not exist"


def test_value_without_canonical_form_is_refused_with_the_ledger_code_and_its_path(
    tmp_path: Path,
) -> None:
    db = tmp_path / "l.db"
    api.init_ledger(db, origin="test/errors")
    with SqliteStore.open(db) as ledger, ledger.writer() as w, pytest.raises(LedgerError) as info:
        w.append("bundle.observed", {"x": [float("inf")]})
    assert type(info.value) is UsageError and not isinstance(info.value, VerifierError)
    assert info.value.code == "entry-not-canonical"
    assert info.value.message == "entry payload /payload/x/0: NaN and infinities are not JSON"
