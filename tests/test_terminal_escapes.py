"""The terminal is an output too: nothing a candidate or a stored document chose reaches it raw.

A patch path holding ``ESC [32m SUPPORT`` or a bidi override, printed raw by ``verify`` or
``check-patch``, could redraw a REJECT as a SUPPORT. Human text output shows every C0, DEL, C1
and bidi control as a visible escape (``\\x1b``, ``\\u202e``); ``--json`` keeps the exact string.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from commit_helpers import make_bundle, make_cohort
from helpers import FIXED_TIME, CliResult, run_cli

from verifiers.canonical import sha256_hex_digest

# Raw characters that must never reach a terminal from input (what `_visible` escapes).
RAW = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
HOSTILE_NAME = "\x1b[32mSUPPORT\u202e.md"
# git's C quoting of HOSTILE_NAME: ESC as \033, U+202E as its UTF-8 bytes in octal
QUOTED = "\\033[32mSUPPORT\\342\\200\\256.md"
HOSTILE_PATCH = (
    f'diff --git "a/{QUOTED}" "b/{QUOTED}"\n--- "a/{QUOTED}"\n+++ "b/{QUOTED}"\n'
    "@@ -1 +1,2 @@\n # Calibration project\n+<!-- patch-evaluator expected -->\n"
).encode()
BIDI_NAME = "docs/\u202etxt.md\u2066x\u2069"
BIDI_PATCH = (
    f"diff --git a/{BIDI_NAME} b/{BIDI_NAME}\n--- a/{BIDI_NAME}\n+++ b/{BIDI_NAME}\n"
    "@@ -1 +1,2 @@\n # x\n+\x9b32mSUPPORT\n"
).encode()


def assert_no_raw_controls(result: CliResult) -> None:
    for stream in (result.stdout, result.stderr):
        # newlines separate lines; nothing else below U+0020 or in the bidi set may appear
        found = sorted({f"U+{ord(c):04X}" for c in RAW.findall(stream)})
        assert found == [], (found, stream)


def test_check_patch_shows_a_bidi_override_in_a_path_escaped(tmp_path: Path) -> None:
    patch = tmp_path / "bidi.patch"
    patch.write_bytes(BIDI_PATCH)
    human = run_cli(["check-patch", str(patch)])
    assert human.code == 0, human.stdout
    assert_no_raw_controls(human)
    assert "docs/\\u202etxt.md\\u2066x\\u2069" in human.stdout
    as_json = run_cli(["check-patch", str(patch), "--json"])
    doc = as_json.json()
    assert doc["valid"] is True
    assert doc["files"][0]["old_path"] == BIDI_NAME  # exact, not escaped


def test_check_patch_with_escape_sequence_path_prints_no_raw_escape(tmp_path: Path) -> None:
    patch = tmp_path / "esc.patch"
    patch.write_bytes(HOSTILE_PATCH)
    human = run_cli(["check-patch", str(patch)])
    assert human.code == 1
    assert_no_raw_controls(human)
    assert human.stdout.startswith("line 1: scope/control-character-in-path")
    doc = run_cli(["check-patch", str(patch), "--json"]).json()
    assert doc["files"][0]["new_path"] == HOSTILE_NAME


def test_error_message_quoting_a_hostile_file_name_is_escaped(tmp_path: Path) -> None:
    name = tmp_path / "x\x1b[2J\x1b[32mSUPPORT\u202e"
    human = run_cli(["check-patch", str(name)])
    assert human.code == 2 and human.error_code() == "file-not-found"
    assert_no_raw_controls(human)
    assert "\\x1b[2J\\x1b[32mSUPPORT\\u202e" in human.stderr
    as_json = run_cli(["check-patch", str(name), "--json"])
    assert str(name) in as_json.json()["error"]["message"]


@pytest.fixture
def verified(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    db = tmp_path / "ledger.db"
    env = {"LEDGER_DB": str(db), "LEDGER_TIME": FIXED_TIME}
    assert run_cli(["init", "--origin", "test/escapes"], env=env, cwd=tmp_path).code == 0
    assert run_cli(["calibrate"], env=env, cwd=tmp_path).code == 0
    frozen = run_cli(["freeze", str(make_cohort(tmp_path))], env=env, cwd=tmp_path)
    assert frozen.code == 0, frozen.stderr
    bundle = make_bundle(tmp_path, "good", "hostile-path")
    (bundle / "changes.patch").write_bytes(HOSTILE_PATCH)
    manifest = json.loads((bundle / "result-manifest.json").read_bytes())
    manifest["produced_artifacts"][0]["digest"] = sha256_hex_digest(HOSTILE_PATCH)
    manifest["worker"]["id"] = "worker\x1b[1A\u202e"
    (bundle / "result-manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return tmp_path, env, bundle


def _verify(root: Path, env: dict[str, str], bundle: Path, *extra: str) -> CliResult:
    return run_cli(
        ["verify", str(bundle), "--task", "test/cohort-a/task-000", *extra], env=env, cwd=root
    )


def test_verify_with_escape_sequence_path_cannot_draw_support(
    verified: tuple[Path, dict[str, str], Path],
) -> None:
    root, env, bundle = verified
    human = _verify(root, env, bundle)
    assert human.code == 1
    assert_no_raw_controls(human)
    assert human.stdout.startswith("REJECT: test/cohort-a / test/cohort-a/task-000")
    assert "\\x1b[32mSUPPORT\\u202e.md" in human.stdout
    # every line but the first is indented: nothing in the output starts a fake verdict line
    assert all(line.startswith("  ") for line in human.stdout.splitlines()[1:])

    doc = _verify(root, env, bundle, "--json").json()
    assert doc["outcome"] == "reject"
    paths = {f.get("path") for f in doc["verification_result"]["findings"]}
    assert HOSTILE_NAME in paths  # the exact string, for machines
    assert doc["verification_result"]["independence"]["worker_id_observed"] == "worker\x1b[1A\u202e"


def _result_object(root: Path, env: dict[str, str]) -> str:
    listing: Any = run_cli(["log", "--json"], env=env, cwd=root).json()
    last = listing["entries"][-1]
    assert last["kind"] == "verification.recorded"
    return str(last["body"]["payload"]["result"]["object"])


def test_show_and_log_of_a_stored_hostile_result_print_no_raw_controls(
    verified: tuple[Path, dict[str, str], Path],
) -> None:
    root, env, bundle = verified
    assert _verify(root, env, bundle).code == 1
    address = _result_object(root, env)
    shown = run_cli(["show", address], env=env, cwd=root)
    assert shown.code == 0
    assert_no_raw_controls(shown)
    assert "\\u202e" in shown.stdout
    exact = run_cli(["show", address, "--json"], env=env, cwd=root).json()
    findings = exact["document"]["findings"]
    assert HOSTILE_NAME in {f.get("path") for f in findings}
    for ref in ("0", "1", "2", "3", "4"):
        assert_no_raw_controls(run_cli(["show", ref], env=env, cwd=root))
    assert_no_raw_controls(run_cli(["log"], env=env, cwd=root))
    assert_no_raw_controls(run_cli(["audit"], env=env, cwd=root))
