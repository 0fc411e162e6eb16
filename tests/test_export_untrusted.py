"""An export is untrusted input (LEDGER.md section 7, "Reading an export").

``audit --from-export`` reads whatever a stranger sent: it must refuse a device, a FIFO, a file
over the size limit, a line over the line limit, bytes that are not strict JSON, and integers
out of range, each as one ``export-malformed`` (or ``export-unreadable``) line naming where, in
bounded time and memory, never ``internal-error``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest
from helpers import CliResult, make_ledger, run_cli, run_cli_subprocess

from ledger.errors import UsageError
from ledger.transparency import export as export_module
from ledger.transparency.export import MAX_EXPORT_BYTES


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("untrusted")
    db = root / "ledger.db"
    make_ledger(db, 5)
    out = root / "intact.jsonl"
    assert run_cli(["--db", str(db), "export", "--out", str(out)]).code == 0
    return db, out


def audit(path: Path | str) -> CliResult:
    result = run_cli(["audit", "--from-export", str(path), "--no-replay", "--json"])
    text = result.stdout + result.stderr
    assert "internal-error" not in text and "Traceback" not in text, text[-1000:]
    return result


def refused(result: CliResult, code: str) -> str:
    assert result.code == 2, result.stdout[-500:]
    assert result.error_code() == code
    message: str = result.json()["error"]["message"]
    return message


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def with_line(tmp_path: Path, intact: Path, number: int, line: bytes) -> Path:
    """The intact export with line ``number`` (1-based) replaced by ``line``."""
    lines = lines_of(intact)
    lines[number - 1] = line
    out = tmp_path / "x.jsonl"
    out.write_bytes(b"".join(lines))
    return out


def test_intact_export_audits_clean(intact: tuple[Path, Path]) -> None:
    result = audit(intact[1])
    assert result.code == 0 and result.json()["ok"] is True


def test_dev_zero_as_an_export_is_refused_at_once() -> None:
    started = time.monotonic()
    message = refused(audit("/dev/zero"), "export-unreadable")
    assert "not a regular file" in message
    assert time.monotonic() - started < 10


def test_fifo_as_an_export_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "export.fifo"
    os.mkfifo(fifo)
    # A fresh process with a timeout: the old reader blocked forever on open().
    result = run_cli_subprocess(["audit", "--from-export", str(fifo), "--json"], timeout=30)
    assert refused(result, "export-unreadable").endswith("is not a regular file")


def test_regular_file_whose_reads_fail_is_refused_not_a_crash() -> None:
    # Hostile-input review: /proc/self/mem is a regular file by fstat (size 0) whose first read
    # fails with EIO; the reader let that OSError out as internal-error.
    result = run_cli_subprocess(["audit", "--from-export", "/proc/self/mem", "--json"], timeout=30)
    assert "Input/output error" in refused(result, "export-unreadable")


def test_symlink_as_an_export_is_refused(intact: tuple[Path, Path], tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(intact[1])
    assert "symlink" in refused(audit(link), "export-unreadable")


def test_sparse_file_over_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    sparse = tmp_path / "huge.jsonl"
    with sparse.open("wb") as handle:
        handle.truncate(MAX_EXPORT_BYTES + 1)
    started = time.monotonic()
    message = refused(audit(sparse), "export-malformed")
    assert f"an export is at most {MAX_EXPORT_BYTES}" in message
    assert time.monotonic() - started < 10


def test_sparse_3_gib_file_of_nul_bytes_is_refused_at_its_first_byte(tmp_path: Path) -> None:
    # Under the size limit, one "line" of 3 GiB of NULs: refused at line 1 without reading it
    # (the old reader gave internal-error: MemoryError).
    sparse = tmp_path / "zeros.jsonl"
    with sparse.open("wb") as handle:
        handle.truncate(3 * 1024**3)
    started = time.monotonic()
    assert refused(audit(sparse), "export-malformed").endswith(":1: not a JSON object")
    assert time.monotonic() - started < 10


def test_sqlite_file_passed_as_an_export_is_refused(intact: tuple[Path, Path]) -> None:
    assert refused(audit(intact[0]), "export-malformed").endswith(":1: not a JSON object")


def test_line_over_the_line_limit_is_refused_without_reading_it_whole(
    intact: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_module, "MAX_EXPORT_LINE", 4096)
    read: list[int] = []
    real_open = export_module._open_export_file

    def counting_open(path: Path) -> object:
        handle = real_open(path)
        readline = handle.readline

        def bounded(size: int = -1) -> bytes:
            line = readline(size)
            read.append(len(line))
            return line

        handle.readline = bounded  # type: ignore[method-assign]
        return handle

    monkeypatch.setattr(export_module, "_open_export_file", counting_open)
    long_line = b'{"type": "entry", "pad": "' + b"x" * 1_000_000 + b'"}\n'
    message = refused(audit(with_line(tmp_path, intact[1], 3, long_line)), "export-malformed")
    assert message.endswith(":3: line longer than 4096 bytes")
    assert max(read) == 4096  # the first byte, then at most the limit: never the whole line


def test_non_utf8_line_is_refused_naming_its_line(
    intact: tuple[Path, Path], tmp_path: Path
) -> None:
    line = lines_of(intact[1])[2].replace(b'"kind": "', b'"kind": "\xff\xfe', 1)
    message = refused(audit(with_line(tmp_path, intact[1], 3, line)), "export-malformed")
    assert ":3: invalid UTF-8" in message


def _entry_line(intact: Path, **fields: object) -> bytes:
    row = json.loads(lines_of(intact)[2])
    row.update(fields)
    return json.dumps(row).encode() + b"\n"


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("seq", 2**64, "integer outside the signed 64-bit range at /seq"),
        ("seq", -1, "seq must be an integer in 0.."),
        ("seq", "2", "seq must be an integer in 0.."),
        ("seq", True, "seq must be an integer in 0.."),
        ("kind", None, "kind must be a string"),
    ],
)
def test_entry_line_with_a_field_out_of_range_is_refused(
    intact: tuple[Path, Path], tmp_path: Path, field: str, value: object, says: str
) -> None:
    line = _entry_line(intact[1], **{field: value})
    message = refused(audit(with_line(tmp_path, intact[1], 3, line)), "export-malformed")
    assert f":3: {says}" in message


def _object_line_number(intact: Path) -> int:
    return next(
        n for n, line in enumerate(lines_of(intact), 1) if json.loads(line)["type"] == "object"
    )


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (2**70, "integer outside the signed 64-bit range at /size"),
        (-5, "size must be an integer in 0.."),
        (2**40, "size must be an integer in 0.."),
    ],
)
def test_object_line_with_a_huge_size_is_refused(
    intact: tuple[Path, Path], tmp_path: Path, value: int, says: str
) -> None:
    number = _object_line_number(intact[1])
    row = json.loads(lines_of(intact[1])[number - 1])
    row["size"] = value
    line = json.dumps(row).encode() + b"\n"
    message = refused(audit(with_line(tmp_path, intact[1], number, line)), "export-malformed")
    assert f":{number}: {says}" in message


def test_duplicate_keys_in_a_line_are_refused(intact: tuple[Path, Path], tmp_path: Path) -> None:
    # json.loads kept the last "seq": the line would have loaded as another entry.
    line = lines_of(intact[1])[2].replace(b'{"body"', b'{"seq": 1, "body"', 1)
    assert line.count(b'"seq"') == 2
    message = refused(audit(with_line(tmp_path, intact[1], 3, line)), "export-malformed")
    assert message.endswith(":3: duplicate object key at /seq")


def test_nan_in_a_line_is_refused(intact: tuple[Path, Path], tmp_path: Path) -> None:
    number = _object_line_number(intact[1])
    line = json.dumps({**json.loads(lines_of(intact[1])[number - 1]), "size": float("nan")})
    assert "NaN" in line
    message = refused(
        audit(with_line(tmp_path, intact[1], number, line.encode() + b"\n")), "export-malformed"
    )
    assert f":{number}: NaN is not a JSON value" in message


def test_a_line_of_many_members_is_refused_before_it_is_parsed(
    intact: tuple[Path, Path], tmp_path: Path
) -> None:
    # Issue 27: a line of small members cost about 20 bytes of memory per byte to parse (a
    # 64 MiB line 1.3 GB; about 6 GiB at the line limit) before it was refused as not an entry.
    # No line `export` writes has more than a few members: counted by its ':' bytes, unparsed.
    line = b'{"type": "entry"' + b"".join(b',"%06x":0' % i for i in range(100_000)) + b"}\n"
    path = with_line(tmp_path, intact[1], 2, line)
    tracemalloc.start()
    try:
        with pytest.raises(UsageError) as refused_line:
            export_module.open_export(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused_line.value.code == "export-malformed"
    assert refused_line.value.message.endswith(
        ":2: more than 512 ':' in one line (an export line is one object of a few members)"
    )
    assert peak < 3 * len(line), peak  # the line read, and nothing parsed from it


def test_an_origin_full_of_colons_still_loads(tmp_path: Path) -> None:
    # The bound above leaves room for what export writes: a header whose origin (at most 255
    # characters) is nearly all ':'.
    db, out = tmp_path / "ledger.db", tmp_path / "export.jsonl"
    origin = "a" + ":a" * 127
    make_ledger(db, 2, origin=origin)
    assert run_cli(["--db", str(db), "export", "--out", str(out)]).code == 0
    assert out.read_bytes().splitlines()[0].count(b":") > 127
    result = audit(out)
    assert result.code == 0, result.stdout[-500:]


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deeply_nested_line_is_refused(
    intact: tuple[Path, Path], tmp_path: Path, depth: int
) -> None:
    line = b'{"type": "entry", "x": ' + b"[" * depth + b"]" * depth + b"}\n"
    message = refused(audit(with_line(tmp_path, intact[1], 2, line)), "export-malformed")
    assert f":2: nesting depth {depth + 1} exceeds the limit of 1" in message


def test_export_read_through_a_copy_is_the_same_as_the_original(
    intact: tuple[Path, Path], tmp_path: Path
) -> None:
    # The strict reader accepts what `export` writes, byte for byte.
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(intact[1], copy)
    original, copied = audit(intact[1]).json(), audit(copy).json()
    assert original == copied and original["ok"] is True
