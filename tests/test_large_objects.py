"""An object of many keys is read, never a segfault (found in issue 27's adversarial pass).

msgspec's ordered encoders (``order="sorted"``: the canonical form, the strict reader's fast path,
``log --json``) sort an object's keys with a quicksort that recurses into one part whatever its
size. About 60,000 keys in an adversarial order (the greatest first, the rest ascending) recurse
once per key and overflow the C stack: a segfault, which no ``except`` catches and no verdict
records. One JSON line of 1 MB took down ``read_json``, ``decode_cohort``, ``canonical_bytes``,
``is_canonical`` (the audit's body check) and ``ledger log --json``. Now no object of more than
``SORT_SAFE_KEYS`` keys reaches msgspec unsorted (``verifiers.jsonread.sort_safe``).

Every case runs in a child process: before the fix the crash took the process with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import attacker, cli_env, make_ledger, rewrite_and_reseal, run_cli_subprocess

KEYS = 100_000
# The greatest key first, the rest ascending: each partition step peels off one key.
OBJECT = "{" + ",".join(['"z":0'] + [f'"{i:06x}":0' for i in range(KEYS)]) + "}"

CASES = {
    "read_json": """
        from verifiers.jsonread import read_json
        read = read_json(data, max_bytes=len(data), max_depth=4)
        print(read.ok, len(read.value["x"]))
    """,
    "decode_cohort": """
        from ledger.documents.cohort import decode_cohort
        decoded = decode_cohort(data)
        print(decoded.ok, [e.path for e in decoded.errors][:1])
    """,
    "canonical_bytes": """
        import json
        from verifiers.canonical import canonical_bytes
        value = json.loads(data)
        reference = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
        print(canonical_bytes(value) == reference)
    """,
    "is_canonical": """
        from verifiers.canonical import is_canonical
        print(is_canonical(data), is_canonical(data.replace(b" ", b"")))
    """,
}
EXPECTED = {
    "read_json": f"True {KEYS + 1}",
    # A cohort whose extensions hold the object: read, canonical, then refused by its contract.
    "decode_cohort": "False ['/schema_version']",
    "canonical_bytes": "True",
    "is_canonical": "False False",
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_object_of_many_keys_in_an_adversarial_order_is_read_not_a_segfault(
    case: str, tmp_path: Path
) -> None:
    path = tmp_path / "document.json"
    path.write_text('{"x": ' + OBJECT + ', "extensions": ' + OBJECT + "}", "utf-8")
    code = f"data = open({str(path)!r}, 'rb').read()\n" + textwrap.dedent(CASES[case])
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=120
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-1500:])
    assert proc.stdout.strip() == EXPECTED[case]


def test_a_tampered_body_with_such_an_object_is_audited_and_logged(tmp_path: Path) -> None:
    # The owner of the file (or a database session) writes the body: the audit must report it,
    # and `log --json` print it, not crash.
    db = tmp_path / "ledger.db"
    make_ledger(db, 2)
    with attacker(db) as conn:
        [(stored,)] = conn.execute("SELECT body FROM entries WHERE seq = 2")
        fields = json.loads(stored)
        fields.pop("payload")
        # Still an entry body (every field there), its payload the object in its order.
        body = json.dumps(fields)[:-1] + ', "payload": ' + OBJECT + "}"
        # The chain re-sealed after it: `log` reads only what its own checks pass.
        rewrite_and_reseal(conn, 2, body.encode())
    audited = run_cli_subprocess(["--db", str(db), "audit", "--no-replay", "--json"])
    assert audited.code == 1, (audited.code, audited.stderr[-1500:])
    codes = {v["code"] for v in json.loads(audited.stdout)["violations"]}
    assert "body-not-canonical" in codes
    logged = run_cli_subprocess(["--db", str(db), "log", "--json"])
    assert logged.code == 0, (logged.code, logged.stderr[-1500:])
    [tampered] = [e for e in json.loads(logged.stdout)["entries"] if e["seq"] == 2]
    assert len(tampered["body"]["payload"]) == KEYS + 1
