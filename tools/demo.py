"""`make demo`: the main job, end to end, on the bundled examples, in a fresh temporary ledger.

Each step runs the real `ledger` command (printed before it runs), so what you see is what a user
would type. The run ends with a summary table and an audit that replays every verification.
Exit status: 0 when every outcome is the expected one and the audit is intact.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from ledger.cli.main import main

REPO = Path(__file__).resolve().parents[1]
ORIGIN = "demo.evidence-ledger.example/ledger"


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def run(db: Path, *args: str, show: bool = True) -> Result:
    """Run one ledger command (in this process, exactly as the console script would) from the
    repository root; echo it and its output."""
    if show:
        print(f"\n$ ledger {' '.join(args)}", flush=True)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["--db", str(db), *args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    if show:
        sys.stdout.write(out.getvalue())
        sys.stdout.write(err.getvalue())
    return Result(code, out.getvalue(), err.getvalue())


def verify_all(db: Path, expected: dict[str, str], prefix: str) -> list[dict[str, Any]]:
    rows = []
    for bundle, want in sorted(expected.items()):
        if not bundle.startswith(prefix):
            continue
        proc = run(db, "verify", bundle, "--json", show=False)
        doc = json.loads(proc.stdout)
        got = doc.get("outcome", doc.get("error", {}).get("code", "?"))
        rows.append(
            {
                "bundle": bundle,
                "task": doc.get("task", "-"),
                "expected": want,
                "got": got,
                "exit": proc.returncode,
                "entry": doc.get("result_entry", "-"),
            }
        )
        print(f"  verify {bundle}: {got} (exit {proc.returncode})")
    return rows


def demo() -> int:
    os.chdir(REPO)  # cohort paths are relative to the repository root
    expected = json.loads((REPO / "fixtures/demo/expected.json").read_text("utf-8"))
    with tempfile.TemporaryDirectory(prefix="ledger-demo-") as tmp:
        db = Path(tmp) / "demo.db"
        print("A fresh ledger, calibrated verifiers, then a cohort frozen BEFORE any outcome.")
        run(db, "init", "--origin", ORIGIN)
        run(db, "calibrate")
        run(db, "freeze", "cohorts/demo", "--root", ".")
        print("\nEach bundle is judged only by the plan the ledger committed for its WorkUnit:")
        rows = verify_all(db, expected, "fixtures/demo/bundles/")
        print(
            "\nThe burned pilot (shaped like the reference's phase-b2-first-five) is imported:"
            " frozen, then burned with the reason its cohort.json records."
        )
        run(db, "freeze", "cohorts/phase-b2-pilot", "--root", ".")
        pilot_bundle = REPO / "fixtures/demo/pilot-bundles"
        if pilot_bundle.is_dir():
            for bundle in sorted(p for p in pilot_bundle.glob("*/*") if p.is_dir())[:1]:
                print("A burned cohort accepts no verification (refused, nothing written):")
                run(db, "verify", str(bundle.relative_to(REPO)))
        print("\nIts successor reuses the unobserved WorkUnits under new, versioned plans:")
        hidden = REPO / "cohorts/phase-b2-successor-hidden-plans"
        extra = ["--hidden-plans", str(hidden.relative_to(REPO))] if hidden.is_dir() else []
        run(db, "freeze", "cohorts/phase-b2-successor", "--root", ".", *extra)
        rows += verify_all(db, expected, "fixtures/demo/successor-bundles/")
        checkpoint = Path(tmp) / "checkpoint.txt"
        print("\nA checkpoint kept outside the file lets anyone prove later that it only grew:")
        run(db, "checkpoint", "--out", str(checkpoint))
        audit = run(db, "audit", "--checkpoint", str(checkpoint))
        print("\nSummary")
        width = max(len("bundle"), *(len(row["bundle"]) for row in rows))
        print(f"  {'bundle':<{width}} {'expected':<8} {'outcome':<8} ok")
        good = True
        for row in rows:
            ok = row["got"] == row["expected"]
            good &= ok
            print(
                f"  {row['bundle']:<{width}} {row['expected']:<8} {row['got']:<8} "
                f"{'yes' if ok else 'NO'}"
            )
        print(
            f"  audit: {'intact' if audit.returncode == 0 else 'VIOLATIONS'}"
            f" (exit {audit.returncode})"
        )
        return 0 if good and audit.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(demo())
