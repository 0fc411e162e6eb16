"""``ledger copy SRC DST``: one ledger into a new store, either direction between SQLite and
PostgreSQL (LEDGER.md section 2, "Copying a ledger").

The source is read in one snapshot and checked whole before anything is written: every row's
seq, prev link, entry hash (BLAKE3 of the body), decoded body (its seq, prev and kind equal the
row's) and stored Merkle nodes (recomputed), every object's address, sha256, size and media
type, every reference stored and every object referenced. A source that fails is refused
(``copy-source-damaged``, naming the first bad row or object) and nothing is created. Then the
destination (a path that does not exist, or an empty database; else
``copy-destination-not-empty``) is created with the source's genesis body and receives every
entry body byte for byte (``Writer.append_verbatim``), each entry's objects in its own
transaction; the result gives the root computed from the copy's own stored nodes. The derived
state is rebuilt by the caller's ``on_writer`` hook (``ledger.state.StateIndex.for_writer``),
in the same transactions.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable
from typing import Annotated, Any, Final

import msgspec
from msgspec import Meta

from ledger.errors import StoreError, UsageError
from ledger.format.entries import GENESIS_KIND, GENESIS_PREV, Clock, system_clock
from ledger.settings import BUSY_TIMEOUT_MS
from ledger.store.base import Store, StoredNodes, Writer, row_entry
from ledger.store.opening import create_store, postgres_url
from ledger.tlog import merkle
from verifiers.canonical import blake3_address

MEDIA_TYPES: Final = ("application/json", "application/octet-stream")
_ENTRIES_PER_WRITE: Final = 500
_PROGRESS_EVERY: Final = 200


class CopyResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``copy_store`` made, and what ``ledger copy --json`` prints
    (``schemas/output-copy-v1``): the new ledger (a path, or the URL with any password
    masked), the entries and objects copied, and the copy's Merkle root in standard base64,
    equal to the source's."""

    destination: str
    entries: Annotated[int, Meta(ge=1)]
    objects: Annotated[int, Meta(ge=0)]
    root_hash: Annotated[str, Meta(pattern="^[A-Za-z0-9+/]{43}=$")]  # base64 of the root


def _damaged(where: str, why: str) -> StoreError:
    return StoreError(
        "copy-source-damaged",
        f"the source {where} {why}; nothing was copied (run `ledger audit` on the source)",
    )


def _check_source(src: Store) -> tuple[int, int, bytes]:
    """The whole source, checked (module docstring): (entries, objects, root)."""
    edge = merkle.CompactRange()
    referenced: set[str] = set()
    prev = GENESIS_PREV
    count = 0
    for seq, row_prev, row_hash, kind, body, nodes in src.unchecked_entry_rows():
        if seq != count:
            raise _damaged(f"entry {seq}", f"follows entry {count - 1}: a seq is missing")
        if not isinstance(body, bytes) or not isinstance(nodes, bytes):
            raise _damaged(f"entry {seq}", "is not stored as bytes")
        try:
            entry = row_entry(seq, row_hash, body)
        except StoreError:
            raise _damaged(f"entry {seq}", "does not decode") from None
        if blake3_address(body) != row_hash:
            raise _damaged(f"entry {seq}", "does not hash to its entry_hash")
        body_fields = (entry.body.seq, entry.body.prev, entry.body.kind)
        if row_prev != prev or body_fields != (seq, prev, kind):
            raise _damaged(f"entry {seq}", "does not link to the entry before it")
        if (seq == 0) != (kind == GENESIS_KIND):
            raise _damaged(f"entry {seq}", "is a genesis entry out of place, or lacks one")
        if b"".join(edge.push(merkle.leaf_hash(body))) != nodes:
            raise _damaged(f"entry {seq}", "has stored Merkle nodes that are not its own")
        for ref in entry.body.refs:
            if ref not in referenced and not src.has_object(ref):
                raise _damaged(f"entry {seq}", f"references {ref}, which is not stored")
            referenced.add(ref)
        prev = row_hash
        count += 1
    if count == 0:
        raise _damaged("ledger", "has no genesis entry")
    objects = 0
    for digest, sha256, media_type, size, body in src.unchecked_object_rows():
        if (
            not isinstance(body, bytes)
            or blake3_address(body) != digest
            or "sha256:" + hashlib.sha256(body).hexdigest() != sha256
            or size != len(body)
            or media_type not in MEDIA_TYPES
        ):
            raise _damaged(f"object {digest}", "does not match its bytes")
        if digest not in referenced:
            raise _damaged(f"object {digest}", "is referenced by no entry")
        objects += 1
    return count, objects, edge.root()


def _root(store: Store) -> bytes:
    size = store.size()
    return merkle.CompactRange.from_source(size, StoredNodes(store)).root()


def copy_store(
    src: Store,
    dst: str | os.PathLike[str],
    *,
    on_writer: Callable[[Writer], Any] | None = None,
    clock: Clock = system_clock,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    progress: Callable[[int, int], None] | None = None,
) -> CopyResult:
    """Copy ``src`` (opened read-only) into the new ledger ``dst`` (module docstring)."""
    if postgres_url(dst) is None and os.path.lexists(dst):
        raise UsageError(
            "copy-destination-not-empty",
            f"{os.fspath(dst)} exists; `ledger copy` writes only a new ledger",
        )
    with src.snapshot():
        total, objects, _root_of_bodies = _check_source(src)
        genesis = src.entry(0)
        if genesis is None:  # checked above; a snapshot does not change
            raise _damaged("ledger", "has no genesis entry")
        origin = str(genesis.payload.get("origin", ""))
        try:
            target, created = create_store(
                dst,
                origin=origin,
                clock=clock,
                busy_timeout_ms=busy_timeout_ms,
                genesis=genesis.body_bytes,
            )
        except StoreError as exc:
            if exc.code != "not-a-ledger":
                raise
            raise UsageError(
                "copy-destination-not-empty",
                f"{exc.message}; `ledger copy` writes only into an empty database",
            ) from None
        with target:
            if not created:
                raise UsageError(
                    "copy-destination-not-empty",
                    f"{target.path} already holds a ledger or other tables; `ledger copy`"
                    " writes only into an empty database",
                )
            if progress is not None:
                progress(1, total)
            _copy_entries(src, target, total, on_writer, progress)
            # The copy's root, from the nodes it stored: the source's, as the checks imply.
            root = base64.b64encode(_root(target)).decode("ascii")
            return CopyResult(str(target.path), target.size(), objects, root)


def _copy_entries(
    src: Store,
    target: Store,
    total: int,
    on_writer: Callable[[Writer], Any] | None,
    progress: Callable[[int, int], None] | None,
) -> None:
    # The checked reads: what is written is what these reads hashed (the row check above read
    # the rows once before; a file rewritten since is caught).
    rows = src.entries(start=1)
    done = 1
    while done < total:
        with target.writer() as w:
            if on_writer is not None:
                on_writer(w)
            for _ in range(min(_ENTRIES_PER_WRITE, total - done)):
                entry = next(rows)
                for ref in entry.body.refs:
                    obj = src.get_object(ref)
                    if obj is None:  # checked already: the snapshot cannot lose it
                        raise _damaged(
                            f"entry {entry.seq}", f"references {ref}, which is not stored"
                        )
                    w.put_object(obj.body, obj.media_type)
                w.append_verbatim(entry.body_bytes)
                done += 1
                if progress is not None and done % _PROGRESS_EVERY == 0:
                    progress(done, total)
    if progress is not None:
        progress(done, total)
