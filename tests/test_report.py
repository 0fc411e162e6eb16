"""``ledger report --html`` (LEDGER.md section 15, "Report"), rendered in a real browser:
Debian's headless Chromium (``make test`` installs the package when it is missing). The DOM
Chromium builds is what is asserted on, with its console log, and a screenshot is taken.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pytest
from helpers import FIXED_TIME, CliResult, run_cli
from test_export import HIDDEN_COHORT, HIDDEN_TASK, SECRET
from verdict_ledger import build_verdict_ledger
from witness_helpers import Log, Witness

from ledger.store.sqlite import SqliteStore

ENV: dict[str, str | None] = {"LEDGER_TIME": FIXED_TIME, "LEDGER_DB": None}


def cli(*args: str) -> CliResult:
    return run_cli(list(args), env=ENV)


@dataclass(frozen=True)
class Rendered:
    dom: str
    console: list[str]  # Chromium's CONSOLE log lines: script errors, blocked fetches
    screenshot: bytes


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:  # never a silent skip: `make test` installs it (Makefile, `browser`)
        pytest.fail("headless Chromium is missing: run `make test`, or apt-get install chromium")
    return found


def render(page: Path, scratch: Path) -> Rendered:
    """The page as Chromium renders it: its DOM, its console, a screenshot."""
    flags = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={scratch / 'profile'}",
        "--enable-logging=stderr", "--v=0",
    ]  # fmt: skip
    url = page.resolve().as_uri()
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = scratch / "shot.png"
    taken = subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1200,2000", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert taken.returncode == 0, taken.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    return Rendered(dom.stdout, console, shot.read_bytes())


@dataclass(frozen=True)
class Built:
    root: Path
    db: Path
    verdicts: dict[str, tuple[int, str]]  # bundle family or task -> (result entry, outcome)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("report")
    db, found = build_verdict_ledger(
        root,
        "test.example/report",
        [
            ("good", "test/cohort-a", "test/cohort-a/task-000"),
            ("wrong-marker", "test/cohort-a", "test/cohort-a/task-001"),
            ("fragment", HIDDEN_COHORT, HIDDEN_TASK),
            ("decoy", HIDDEN_COHORT, HIDDEN_TASK),
        ],
    )
    return Built(root, db, found)


def report(built: Built, out: Path, *extra: str) -> str:
    result = cli("--db", str(built.db), "report", "--html", str(out), *extra)
    assert result.code == 0, result.stderr
    return out.read_text(encoding="utf-8")


def test_report_renders_in_chromium_with_a_row_per_verdict_and_no_console_error(
    built: Built, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    report(built, page)
    rendered = render(page, tmp_path)
    assert rendered.console == []
    assert rendered.screenshot.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(rendered.screenshot) > 10_000
    with SqliteStore.open_read_only(built.db) as ledger:
        recorded = list(ledger.entries(kinds=["verification.recorded"]))
    rows = re.findall(r'<tr class="verification" id="entry-(\d+)"', rendered.dom)
    assert sorted(map(int, rows)) == [e.seq for e in recorded]
    seq, outcome = built.verdicts["wrong-marker"]
    assert outcome == "reject"
    row = rendered.dom[rendered.dom.index(f'id="entry-{seq}"') :].split("</tr>")[0]
    assert '<td class="outcome outcome-reject">reject</td>' in row
    assert 'id="audit" data-ok="true"' in rendered.dom
    # The chart has a bar per outcome of each task with a verdict, counts included.
    assert rendered.dom.count('class="bar" data-outcome="reject" data-count="1"') >= 2


def test_the_console_check_sees_a_page_error(tmp_path: Path) -> None:
    """The control for the assertion above: a page with a script error is caught."""
    page = tmp_path / "broken.html"
    page.write_text("<p>x</p><script>console.error('seen-7'); notDefined();</script>")
    rendered = render(page, tmp_path)
    assert any("seen-7" in line for line in rendered.console)
    assert any("notDefined" in line for line in rendered.console)


def test_report_fetches_nothing_when_opened(built: Built, tmp_path: Path) -> None:
    html = report(built, tmp_path / "report.html")
    assert "default-src 'none'" in html  # the page's own policy forbids every fetch
    assert not re.search(r"\b(src|href)\s*=", html)
    assert "<script" not in html and "<link" not in html


def test_values_from_the_ledger_are_escaped(built: Built, tmp_path: Path) -> None:
    html = report(built, tmp_path / "report.html")
    # The wrong-marker reject's finding quotes the missing text in single quotes.
    assert "Missing: &#x27;patch-evaluator expected&#x27;" in html
    assert "'patch-evaluator expected'" not in html


def test_findings_of_every_reject_are_shown(built: Built, tmp_path: Path) -> None:
    html = report(built, tmp_path / "report.html")
    seq, _ = built.verdicts["wrong-marker"]
    block = html[html.index(f'<div class="reject" data-entry="{seq}">') :].split("</div>")[0]
    assert '<li class="finding"><strong>high/correctness</strong>' in block


def test_public_report_withholds_hidden_tasks_results(built: Built, tmp_path: Path) -> None:
    full = report(built, tmp_path / "full.html")
    public = report(built, tmp_path / "public.html", "--public")
    seq, outcome = built.verdicts["decoy"]
    assert outcome == "reject"
    hidden_block = public[public.index(f'data-entry="{seq}"') :].split("</div>")[0]
    assert "result withheld" in hidden_block and 'class="finding"' not in hidden_block
    assert 'class="finding"' in full[full.index(f'data-entry="{seq}"') :].split("</div>")[0]
    assert SECRET not in public


def test_report_of_one_cohort_shows_only_it(built: Built, tmp_path: Path) -> None:
    html = report(built, tmp_path / "one.html", "--cohort", "test/cohort-a")
    assert 'data-cohort="test/cohort-a"' in html and f'data-cohort="{HIDDEN_COHORT}"' not in html
    refused = cli("--db", str(built.db), "report", "--html", str(tmp_path / "x.html"),
                  "--cohort", "no/such")  # fmt: skip
    assert refused.code == 2 and refused.error_code() == "cohort-not-frozen"
    assert not (tmp_path / "x.html").exists()


def test_report_refuses_to_replace_a_file(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    out.write_text("mine")
    refused = cli("--db", str(built.db), "report", "--html", str(out))
    assert refused.code == 2 and refused.error_code() == "file-exists"
    assert out.read_text() == "mine"


def test_report_shows_the_signed_and_cosigned_note_the_ledger_recorded(
    built: Built, tmp_path: Path
) -> None:
    """Words: the page showed only the bare checkpoint body it computes, never the log-signed,
    witness-cosigned note `checkpoint --witness` recorded; it shows that note, cosignature lines
    included, and what it covers (and, without one, says none is recorded)."""
    bare = report(built, tmp_path / "bare.html")
    assert '<p id="recorded-note-none">No signed checkpoint is recorded' in bare
    db = tmp_path / "witnessed.db"
    shutil.copy(built.db, db)
    assert cli("--db", str(db), "keygen", "--out", str(tmp_path / "log")).code == 0
    keys = ((tmp_path / "log.key").read_text().strip(), (tmp_path / "log.pub").read_text().strip())
    witness = Witness(tmp_path / "w", Log("test.example/report", keys), name="w.example/r")
    with witness.serve() as server:
        made = cli("--db", str(db), "checkpoint", "--sign", str(tmp_path / "log.key"), "--json",
                   "--witness", f"http://127.0.0.1:{server.port}={witness.vkey}")  # fmt: skip
    assert made.code == 0, made.stdout + made.stderr
    printed = made.json()["note"]  # what `checkpoint --witness` printed: note + cosignature
    with SqliteStore.open_read_only(db) as ledger:
        (entry,) = ledger.entries(kinds=["checkpoint.witnessed"])
    payload = entry.payload
    assert printed == payload["note"] + payload["cosignatures"][0]["cosignature"]
    html = report(Built(built.root, db, built.verdicts), tmp_path / "page.html")
    assert f'<pre id="recorded-note">{escape(printed, quote=True)}</pre>' in html
    about = html[html.index('<p id="recorded-note-about"') :].split("</p>")[0]
    assert f'data-entry="{entry.seq}" data-tree-size="{payload["tree_size"]}"' in about
    assert f"the first {payload['tree_size']} entries, cosigned by w.example/r." in about
    assert "valid" not in about and "intact" not in about


def test_the_report_draws_its_outcome_columns_from_the_contract_not_a_copy() -> None:
    """``interop/report.py`` kept its own tuple of the four outcome words (issue 31 item 2):
    a fifth outcome in the contract would have been counted nowhere on the page. The columns,
    the legend and the colours are the contract's outcomes, one tuple."""
    from ledger.interop import report
    from verifiers.contracts import OUTCOMES

    assert report.OUTCOMES is OUTCOMES
    assert set(report.COLOURS) == set(OUTCOMES)
