"""``ledger digest``: the two digest kinds the formats use, each named.

- ``canonical``: the reference canonical digest of a JSON document (``sha256:`` of its canonical
  bytes, LEDGER.md section 1): what a WorkUnit, plan or manifest digest field holds.
- ``raw``: ``sha256:`` of the exact bytes: what an artifact or log digest field holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ledger.errors import UsageError
from verifiers.canonical import CanonicalFormError, canonical_digest, sha256_hex_digest
from verifiers.jsonread import read_json

# The largest document any contract accepts (a cohort, 16 MiB) bounds a canonical digest.
MAX_JSON_BYTES: Final = 16 * 1024 * 1024
MAX_JSON_DEPTH: Final = 64


@dataclass(frozen=True, slots=True)
class DigestResult:
    kind: str  # "canonical" | "raw"
    digest: str
    size: int


def raw_digest(data: bytes) -> DigestResult:
    return DigestResult(kind="raw", digest=sha256_hex_digest(data), size=len(data))


def json_digest(data: bytes, *, what: str) -> DigestResult:
    """The canonical digest of one strict JSON document; UsageError ``not-json`` otherwise."""
    read = read_json(data, max_bytes=MAX_JSON_BYTES, max_depth=MAX_JSON_DEPTH)
    if not read.ok:
        first = read.errors[0]
        raise UsageError(
            "not-json",
            f"{what} is not strict JSON ({first.path or '/'}: {first.message}); use --raw for"
            " the sha256 of its bytes",
        )
    try:
        digest = canonical_digest(read.value)
    except CanonicalFormError as exc:
        raise UsageError(
            "not-json", f"{what} has no canonical form ({exc}); use --raw for its bytes"
        ) from None
    return DigestResult(kind="canonical", digest=digest, size=len(data))
