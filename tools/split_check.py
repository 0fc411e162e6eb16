"""Check that splitting LEDGER.md by reader lost nothing (issue 31 item 3): every sentence of the
LEDGER.md of a revision before the split is in one of the documents it was split into.

    python -m tools.split_check [REV]    (default: BEFORE_SPLIT, the commit the split started from)

Both sides are normalised before they are compared: a heading's marks and a list item's marker
dropped (a heading may move and change level: its words must be somewhere), whitespace
collapsed (a paragraph may be re-wrapped), a heading its own sentence, a rule's number
(``**R5.3**``) and the tests it names (``[held by ...]``) taken out; a sentence the split had to
reword is listed in ``REWORDED`` with its new form, which is what is looked for. A sentence is a
stretch of a paragraph up to ``.``, ``;`` or ``:`` and a space; a table row is one. Pointers the
split left where text was are new text, so they are not checked. Prints each lost sentence and
exits 1 when there is one; 0 and a count when there is none."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE_SPLIT = "34c96f5"
DOCUMENTS = ("LEDGER.md", "docs/CLI.md", "docs/DESIGN.md", "benchmarks/README.md", "README.md",
             "docs/ARCHITECTURE.md", "SECURITY.md")  # fmt: skip
RULE_TAG = re.compile(r"\*\*R\d+\.\d+\*\*\s*|\s*\[held by [^\]]*\]")
MARKER = re.compile(r"^\s*(?:#+\s+)?(?:[-*]\s+|\d+\.\s+)?")
SENTENCE_END = re.compile(r"(?<=[.;:])\s+")
# Sentences the split had to reword (a pointer to text that moved on), old -> new: the new is
# what is looked for.
_REF_ROW = (
    "| `ref-too-short` / `ref-ambiguous` | `show blake3:<prefix>` with fewer than 8 hex digits / a"
    " prefix of more than one entry or object ({}) |"
)
_ADAPTERS = (
    "a ledger result names only its adapters so that it reads the same on every machine ({}),"
    " and the adapter and its version are compared in `verifier`."
)
REWORDED = {
    '"Reading entries" above).': 'benchmarks/README.md, "Reading entries").',
    _REF_ROW.format('section 7, "JSON shapes printed by the CLI"'): _REF_ROW.format(
        'docs/CLI.md, "Outputs"'
    ),
    _ADAPTERS.format('section 12, "Results are reproducible"'): _ADAPTERS.format(
        'docs/DESIGN.md, "Results are reproducible"'
    ),
}


def normalise(text: str) -> str:
    lines = (MARKER.sub("", line) for line in RULE_TAG.sub("", text).splitlines())
    return " ".join(" ".join(lines).split())


def sentences(text: str) -> list[str]:
    """Every sentence of every paragraph (and every table row) of ``text``, normalised."""
    found: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        lines = paragraph.splitlines()
        found += [normalise(line) for line in lines if line.startswith(("|", "#"))]
        prose = "\n".join(line for line in lines if not line.startswith(("|", "#")))
        found += [s for s in SENTENCE_END.split(normalise(prose)) if s]
    return found


def lost(old: str, new: list[str]) -> list[str]:
    """The sentences of ``old`` that none of ``new`` holds."""
    whole = "\n".join(normalise(text) for text in new)
    return [s for s in sentences(old) if REWORDED.get(s, s) not in whole]


def main(argv: list[str]) -> int:
    revision = argv[0] if argv else BEFORE_SPLIT
    old = subprocess.run(
        ["git", "show", f"{revision}:LEDGER.md"], cwd=REPO, check=True, capture_output=True,
        text=True,
    ).stdout  # fmt: skip
    missing = lost(old, [(REPO / name).read_text("utf-8") for name in DOCUMENTS])
    for sentence in missing:
        print(f"lost: {sentence[:200]}")
    print(f"{len(sentences(old))} sentences of LEDGER.md at {revision}: {len(missing)} lost")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
