"""Peak memory and time of `ledger check-patch` and `ledger verify` on hostile diff headers.

Issue 13 item 1: one unquoted `diff --git a/x b/ b/ b/ ...` line made the parser list every split
of the names as strings (quadratic: about 2.8 GB at 64 KiB). This script measures, for patches of
64 KiB, 1 MiB and 8 MiB:

- `hostile`: the calibration `good` patch followed by one mode-only section whose `diff --git`
  line is `a/x b/ b/ b/ ...` up to the size (the issue's attack; refused as
  `ambiguous-diff-git-header`);
- `hostile-resolvable` (check-patch only): one section whose `diff --git`, `---` and `+++` names
  are all `x b/ b/ ...`, so the split resolves and every later step (path checks, hunks) runs;
- `baseline`: a plain valid patch of the same size (the `good` patch with filler added lines).

Each command runs in a fresh process started by a small launcher, which reports
`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` (peak RSS of the command) and its wall time, so the
measuring process's own memory never counts (Linux carries a parent's peak RSS across fork and
exec; the launcher is small). `--repeat N` (default 3): median time, largest peak; each verify
starts from a fresh copy of the ledger. Times include interpreter start (about 0.5-1 s).
`verify` runs on a copy of one ledger (init, calibrate, a cohort whose plan has
`max_candidate_bytes` = 9 MiB, frozen).

Usage: `python benchmarks/hostile_headers.py [--sizes 64k,1m,8m] [--keep DIR]`. Prints a table;
exit 1 when an outcome is not the expected one (hostile refused, baseline valid / support).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from commit_helpers import make_bundle, make_cohort  # noqa: E402

from verifiers.calibration import PLANS  # noqa: E402

ORIGIN = "bench.evidence-ledger.example/hostile-headers"
PLAN_KEY = "v0.2-whole-line"  # the plan the calibration `good` bundle satisfies
BENCH_PLAN_KEY = "bench-hostile-headers"
MAX_CANDIDATE = 9 * 1024 * 1024
TASK = "bench/hostile-headers/task-000"
SIZES = {"64k": 64 * 1024, "1m": 1024 * 1024, "8m": 8 * 1024 * 1024}

# Runs one command in a child and prints its peak RSS (KiB on Linux) and wall seconds.
LAUNCHER = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": p.returncode, "seconds": dt, "maxrss_kib": rss,
                  "stdout": p.stdout.decode("utf-8", "replace"),
                  "stderr": p.stderr.decode("utf-8", "replace")[-2000:]}))
"""


def good_patch() -> bytes:
    from verifiers.calibration import BUNDLES

    return dict(BUNDLES["good"].files)["changes.patch"]


def hostile_patch(size: int) -> bytes:
    head = good_patch() + b"diff --git a/x"
    tail = b"\nold mode 100644\nnew mode 100755\n"
    body = b" b/" * ((size - len(head) - len(tail)) // 3)
    return head + body + tail


def hostile_resolvable_patch(size: int) -> bytes:
    fixed = len("diff --git a/ b/\n--- a/\n+++ b/\n@@ -1 +1 @@\n-a\n+b\n")
    name = "x" + " b/" * ((size - fixed) // 12)
    return (
        f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-a\n+b\n"
    ).encode()


def baseline_patch(size: int) -> bytes:
    """The `good` patch (a README hunk) with filler added lines: valid, still a support."""
    head = b"diff --git a/README.md b/README.md\nindex 3b18e51..8c7e5a6 100644\n"
    head += b"--- a/README.md\n+++ b/README.md\n"
    fixed = head + b" # Calibration project\n+<!-- patch-evaluator expected -->\n"
    line = b"+filler line of a plain valid patch, about sixty bytes long....\n"
    count = max(0, (size - len(fixed) - 32) // len(line))
    hunk = b"@@ -1 +1,%d @@\n" % (count + 3)  # context, marker, fillers, one padding line
    out = head + hunk + fixed[len(head) :] + line * count
    return out + b"+" + b"x" * max(0, size - len(out) - 2) + b"\n"


REPEAT = 3
TEMPLATE: list[Path] = []


def run_measured(args: list[str], fresh: Path | None = None) -> dict[str, Any]:
    """REPEAT runs, each in a new launcher; median wall time, largest peak RSS, last output.

    ``fresh``: a ledger copied over from the template before each run (verify writes to it).
    """
    runs: list[dict[str, Any]] = []
    for _ in range(REPEAT):
        if fresh is not None:
            shutil.copyfile(TEMPLATE[0], fresh)
        out = subprocess.run(
            [sys.executable, "-c", LAUNCHER, *args], capture_output=True, check=True, cwd=REPO
        )
        runs.append(json.loads(out.stdout))
    result = dict(runs[-1])
    result["seconds"] = statistics.median(r["seconds"] for r in runs)
    result["maxrss_kib"] = max(r["maxrss_kib"] for r in runs)
    return result


def ledger_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "ledger", *args]


def prepare_ledger(root: Path) -> Path:
    plan = copy.deepcopy(PLANS[PLAN_KEY])
    plan["backend"]["max_candidate_bytes"] = MAX_CANDIDATE
    PLANS[BENCH_PLAN_KEY] = plan  # this process only: make_cohort writes the plan file
    # Five tasks (a frozen cohort's minimum) on the one plan; verify names the first.
    cohort = make_cohort(root, "bench/hostile-headers", [BENCH_PLAN_KEY] * 5)
    db = root / "template.db"
    for args in (
        ("init", "--origin", ORIGIN),
        ("calibrate",),
        ("freeze", str(cohort), "--root", str(root)),
    ):
        subprocess.run(ledger_cmd("--db", str(db), *args), check=True, capture_output=True)
    return db


def bundle_with(root: Path, name: str, patch: bytes) -> Path:
    bundle = make_bundle(root, "good", name)
    (bundle / "changes.patch").write_bytes(patch)
    manifest_path = bundle / "result-manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    for artifact in manifest["produced_artifacts"]:
        if artifact["locator"] == "changes.patch":
            artifact["digest"] = "sha256:" + hashlib.sha256(patch).hexdigest()
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return bundle


def measure(root: Path, template: Path, label: str, kind: str, patch: bytes) -> dict[str, Any]:
    path = root / f"{label}-{kind}.patch"
    path.write_bytes(patch)
    check = run_measured(ledger_cmd("check-patch", str(path), "--json"))
    doc = json.loads(check["stdout"]) if check["rc"] in (0, 1) else {}
    codes = sorted({f["code"] for f in doc.get("findings", [])})
    row: dict[str, Any] = {
        "size": label,
        "kind": kind,
        "bytes": len(patch),
        "check": check,
        "check_codes": codes,
        "check_valid": doc.get("valid"),
    }
    if kind != "hostile-resolvable":
        db = root / f"{label}-{kind}.db"
        bundle = bundle_with(root, f"{label}-{kind}", patch)
        verify = run_measured(
            ledger_cmd("--db", str(db), "verify", str(bundle), "--task", TASK, "--json"), db
        )
        vdoc = json.loads(verify["stdout"]) if verify["stdout"].strip() else {}
        row["verify"] = verify
        row["verify_outcome"] = vdoc.get("outcome", vdoc.get("error", {}).get("code", "?"))
    return row


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def main(argv: list[str] | None = None) -> int:
    global REPEAT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64k,1m,8m")
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=REPEAT, help="runs per figure (median)")
    args = parser.parse_args(argv)
    REPEAT = max(1, args.repeat)
    sizes = [s for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="ledger-hostile-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        template = prepare_ledger(root)
        TEMPLATE[:] = [template]
        rows: list[dict[str, Any]] = []
        for label in sizes:
            size = SIZES[label]
            rows.append(measure(root, template, label, "baseline", baseline_patch(size)))
            rows.append(measure(root, template, label, "hostile", hostile_patch(size)))
            rows.append(
                measure(root, template, label, "hostile-resolvable", hostile_resolvable_patch(size))
            )
    ok = True
    base: dict[tuple[str, str], dict[str, Any]] = {}
    print(
        f"{'size':>4} {'patch':<19} {'bytes':>9} {'command':<12} {'peak RSS MiB':>12} "
        f"{'x base':>7} {'seconds':>8} {'x base':>7}  result"
    )
    for row in rows:
        for command in ("check", "verify"):
            if command not in row:
                continue
            m = row[command]
            if row["kind"] == "baseline":
                base[(row["size"], command)] = m
            b = base[(row["size"], command)]
            if command == "check":
                result = "valid" if row["check_valid"] else ",".join(row["check_codes"])
                expect_ok = row["check_valid"] is (row["kind"] == "baseline")
            else:
                result = row["verify_outcome"]
                expect_ok = result == ("support" if row["kind"] == "baseline" else "reject")
            ok &= expect_ok
            print(
                f"{row['size']:>4} {row['kind']:<19} {row['bytes']:>9} "
                f"{'check-patch' if command == 'check' else 'verify':<12} "
                f"{mib(m['maxrss_kib']):>12} {m['maxrss_kib'] / b['maxrss_kib']:>7.2f} "
                f"{m['seconds']:>8.3f} {m['seconds'] / b['seconds']:>7.2f}  "
                f"{result}{'' if expect_ok else '  UNEXPECTED'}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
