"""Random mutations of valid bundles never make the runner raise, and replay is exact.

A deterministic loop (``random.Random`` with fixed seeds) covers the bulk; hypothesis covers a
smaller, shrinking-friendly set. Every case goes through ``run`` with the bound plans.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifiers.bundle import snapshot_from_bytes
from verifiers.calibration import (
    BUNDLES,
    FINISHED_AT,
    JSON_WORK_UNIT,
    PATCH_WORK_UNIT,
    PLANS,
    STARTED_AT,
    typed_plan,
    typed_work_unit,
)
from verifiers.contracts import decode_verification_result
from verifiers.runner import RunOutcome, run

PATCH_CASES = [
    ("good", "v0.2-whole-line"),
    ("fragment", "v0.3-fragment"),
    ("correct", "v0.4-transition"),
    ("decoy", "v0.4-transition"),
]
TYPED_PLANS = {key: typed_plan(PLANS[key]) for key in PLANS}
PATCH_WU = typed_work_unit(PATCH_WORK_UNIT)
JSON_WU = typed_work_unit(JSON_WORK_UNIT)
LOOP_CASES = 16_000
OUTCOMES = {"support", "reject"}

_JUNK: list[Any] = [
    None,
    True,
    0,
    -1,
    2**63,
    1.5,
    "",
    "x" * 300,
    [],
    {},
    ["a"],
    {"k": 1},
    "../../etc/passwd",
    "/abs",
    "sha256:" + "0" * 64,
    "succeeded",
    "failed",
]


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    choice = rng.randrange(7)
    pos = rng.randrange(len(data))
    if choice == 0:
        return data[:pos] + bytes([rng.randrange(256)]) + data[pos + 1 :]
    if choice == 1:
        return data[:pos] + data[pos + rng.randrange(1, 16) :]
    if choice == 2:
        lines = data.split(b"\n")
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
        return b"\n".join(lines)
    if choice == 3:
        return (
            data[:pos]
            + rng.choice(
                [
                    b"\r",
                    b"\x00",
                    b"\\",
                    b"@@ -1 +1 @@\n",
                    b"+",
                    b"-",
                    b"diff --git a/x b/x\n",
                    b"\xff",
                    b" ",
                ]
            )
            + data[pos:]
        )
    if choice == 4:
        return data[:pos]
    if choice == 5:
        return data.replace(
            b"README.md",
            rng.choice(
                [b"SECURITY.md", b".git/config", b"../x", b"/etc/x", b"a b", b"README.md\t"]
            ),
        )
    return data + data


def mutate_json(rng: random.Random, value: Any, depth: int = 0) -> Any:
    if isinstance(value, dict) and value and depth < 6:
        key = rng.choice(sorted(value))
        out = dict(value)
        roll = rng.randrange(4)
        if roll == 0:
            del out[key]
        elif roll == 1:
            out[key] = rng.choice(_JUNK)
        elif roll == 2:
            out["unexpected_" + key] = 1
        else:
            out[key] = mutate_json(rng, value[key], depth + 1)
        return out
    if isinstance(value, list) and value and depth < 6:
        out_list = list(value)
        roll = rng.randrange(3)
        i = rng.randrange(len(out_list))
        if roll == 0:
            out_list.append(out_list[i])
        elif roll == 1:
            del out_list[i]
        else:
            out_list[i] = mutate_json(rng, out_list[i], depth + 1)
        return out_list
    return rng.choice(_JUNK)


def judge(
    plan_key: str, manifest: bytes, files: list[tuple[str, bytes]], *, replay: bool = False
) -> RunOutcome:
    """Judge one case. ``replay`` decodes the plan and WorkUnit afresh from their bytes, as the
    audit does, so a replay shares no Python object with the first run (no cache can answer)."""
    work_unit = JSON_WORK_UNIT if plan_key == "v0.1-json" else PATCH_WORK_UNIT
    plan, wu = (
        (typed_plan(PLANS[plan_key]), typed_work_unit(work_unit))
        if replay
        else (TYPED_PLANS[plan_key], JSON_WU if plan_key == "v0.1-json" else PATCH_WU)
    )
    snapshot = snapshot_from_bytes(manifest, files)
    outcome = run(plan, wu, snapshot, started_at=STARTED_AT, finished_at=FINISHED_AT)
    assert outcome.outcome in OUTCOMES
    return outcome


def one_case(rng: random.Random) -> tuple[str, bytes, list[tuple[str, bytes]]]:
    family, plan_key = rng.choice([*PATCH_CASES, ("json-good", "v0.1-json")])
    bundle = BUNDLES[family]
    files = [(n, d) for n, d in bundle.files if n != "result-manifest.json"]
    manifest = bundle.manifest
    target = rng.randrange(4)
    if target == 0:
        manifest = mutate_bytes(rng, manifest)
    elif target == 1:
        manifest = json.dumps(mutate_json(rng, json.loads(manifest))).encode()
    else:
        index = rng.randrange(len(files))
        name, data = files[index]
        files[index] = (name, mutate_bytes(rng, data))
        if target == 3:
            # Keep the manifest's digest in step, so the mutation reaches the parser.
            doc = json.loads(manifest)
            from verifiers.canonical import sha256_hex_digest

            for item in doc.get("produced_artifacts", []) + doc.get("logs", []):
                if item.get("locator") == name:
                    item["digest"] = sha256_hex_digest(files[index][1])
            manifest = json.dumps(doc).encode()
    return plan_key, manifest, files


def test_random_mutations_never_raise_and_replay_exactly() -> None:
    rng = random.Random(20260101)
    outcomes: dict[str, int] = {}
    for index in range(LOOP_CASES):
        plan_key, manifest, files = one_case(rng)
        outcome = judge(plan_key, manifest, files)
        outcomes[outcome.outcome] = outcomes.get(outcome.outcome, 0) + 1
        if index % 16 == 0:
            again = judge(plan_key, manifest, files, replay=True)
            assert again.result_bytes == outcome.result_bytes
            assert decode_verification_result(outcome.result_bytes).ok
    # The mutations must exercise both outcomes, or the loop proves little.
    assert outcomes.get("reject", 0) > LOOP_CASES // 2
    assert outcomes.get("support", 0) > 0


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patch=st.binary(max_size=400), family_plan=st.sampled_from(PATCH_CASES))
def test_arbitrary_patch_bytes_with_honest_digest(
    patch: bytes, family_plan: tuple[str, str]
) -> None:
    from verifiers.canonical import sha256_hex_digest

    family, plan_key = family_plan
    bundle = BUNDLES[family]
    doc = json.loads(bundle.manifest)
    doc["produced_artifacts"][0]["digest"] = sha256_hex_digest(patch)
    files = [(n, d) for n, d in bundle.files if n not in ("result-manifest.json", "changes.patch")]
    files.append(("changes.patch", patch))
    manifest = json.dumps(doc).encode()
    first = judge(plan_key, manifest, files)
    assert first.result_bytes == judge(plan_key, manifest, files, replay=True).result_bytes


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), rounds=st.integers(1, 4))
def test_stacked_manifest_mutations(seed: int, rounds: int) -> None:
    rng = random.Random(seed)
    bundle = BUNDLES["good"]
    doc: Any = json.loads(bundle.manifest)
    for _ in range(rounds):
        doc = mutate_json(rng, doc)
    manifest = json.dumps(doc).encode()
    files = [(n, d) for n, d in bundle.files if n != "result-manifest.json"]
    first = judge("v0.2-whole-line", manifest, files)
    replayed = judge("v0.2-whole-line", manifest, files, replay=True)
    assert first.result_bytes == replayed.result_bytes
