"""Write the seed corpora of the fuzz targets that have no hand-made seeds (deterministic).

``.venv/bin/python fuzz/seeds.py`` writes ``tests/corpus/{read_json,entry,export,checkpoint,
git_diff}/seed-*.bin`` from real documents, entries, an export, checkpoints, notes, keys and a
tlog proof made by the code itself with fixed inputs, and diffs git writes of seeded random
edits. Existing files are left alone.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "campaigns"), str(ROOT)]

from helpers import ledger_command  # noqa: E402 (tests/ is on the path only from here)

CORPUS = ROOT / "tests" / "corpus"


def _write(folder: str, name: str, data: bytes) -> None:
    path = CORPUS / folder / f"seed-{name}.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(data)


def _read_json_seeds() -> None:
    # Every document seed of the decoders is JSON: a few of each kind.
    for folder in ("work_unit", "evaluator_plan", "cohort", "result_manifest", "burn_notice"):
        for path in sorted((CORPUS / folder).iterdir())[:4]:
            _write("read_json", f"{folder}-{path.stem}", path.read_bytes())
    for name, data in {
        "scalars": b'[null, true, false, 0, -1, 1.5, "x", "\\u00e9", {}]',
        "nested": b'{"a": {"b": {"c": [[[1]]]}}}',
        "dupkey": b'{"a": 1, "a": 2}',
        "bigint": b"123456789012345678901234567890",
    }.items():
        _write("read_json", name, data)


def _cli(root: Path, *args: str) -> None:
    env = {**os.environ, "LEDGER_DB": str(root / "seed.db"), "LEDGER_TIME": "2026-11-01T12:00:00Z"}
    subprocess.run(
        [*ledger_command(), *args],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )


def _ledger_seeds() -> None:
    # One entry of every kind: init, calibrate, freeze, verify (observed + recorded), burn.
    from commit_helpers import make_bundle, make_cohort

    from ledger.store.sqlite import SqliteStore
    from ledger.transparency.export import export

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _cli(root, "init", "--origin", "fuzz.example/ledger")
        _cli(root, "calibrate")
        cohort = make_cohort(root, plan_keys=("v0.2-whole-line",) * 5)
        _cli(root, "freeze", str(cohort))
        _cli(root, "verify", str(make_bundle(root, "good")), "--task", "test/cohort-a/task-000")
        with SqliteStore.open(root / "seed.db") as ledger:
            for entry in ledger.entries():
                _write("entry", f"{entry.seq}", entry.body_bytes)
            out = io.StringIO()
            export(ledger, out)
    text = out.getvalue().encode("utf-8")
    _write("export", "full", text)
    lines = text.splitlines(keepends=True)
    _write("export", "header-only", lines[0])
    _write("export", "header-and-genesis", b"".join(lines[:2]))
    _write(
        "export",
        "withheld",
        lines[0]
        + b'{"type":"object","digest":"blake3:'
        + b"0" * 64
        + b'","sha256":"sha256:'
        + b"0" * 64
        + b'","size":3,"withheld":true}\n',
    )
    _write("export", "reordered", b"".join([lines[0], *reversed(lines[1:])]))


def _checkpoint_seeds() -> None:
    from fuzz_targets import _keys

    from ledger.tlog.notes import (
        Checkpoint,
        format_checkpoint,
        format_tlog_proof,
        sign_checkpoint,
    )

    signer, verifier = _keys()
    cp = Checkpoint("fuzz.example/log", 5, bytes(range(32)), ())
    body = format_checkpoint(cp)
    note = sign_checkpoint(cp, signer)
    _write("checkpoint", "body", body.encode())
    _write("checkpoint", "note", note.encode())
    _write(
        "checkpoint",
        "extensions",
        format_checkpoint(
            Checkpoint("fuzz.example/log", 0, bytes(32), ("ext one", "ext two"))
        ).encode(),
    )
    _write("checkpoint", "vkey", verifier.encode())
    _write("checkpoint", "skey", signer.encode())
    proof = format_tlog_proof(2, [bytes(32), bytes(range(1, 33))], note, extra=b"x")
    _write("checkpoint", "tlog-proof", proof.encode())


def _git_diff_seeds() -> None:
    # Diffs git itself writes (every kind of FLAGS) of seeded random edits: the git_diff
    # target mutates them.
    import random

    from git_oracle import FLAGS, Git, random_edit

    with tempfile.TemporaryDirectory() as tmp:
        git = Git(Path(tmp))
        rng = random.Random(27)
        present: set[str] = set()
        for _ in range(4):
            random_edit(git, rng, present)
        base = git.commit()
        for round_ in range(3):
            for _ in range(4):
                random_edit(git, rng, present)
            head = git.commit()
            for flags in FLAGS:
                patch = git.diff(base, head, *flags)
                if patch:
                    name = "".join(f.strip("-")[:6] for f in flags) or "default"
                    _write("git_diff", f"{round_}-{name}", patch)
            base = head


if __name__ == "__main__":
    _git_diff_seeds()
    _read_json_seeds()
    _ledger_seeds()
    _checkpoint_seeds()
