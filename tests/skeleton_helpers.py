"""Write what an author writes in place of a skeleton's placeholders (``ledger new``), so a test
that is about something else starts from a cohort ``lint`` and ``freeze`` accept.

Each placeholder is found by the checker's own scan (``find_placeholders``) and replaced by the
value its hint asks for; a hint this table does not know fails the test, so a new placeholder in
the skeleton cannot slip past the tests that fill them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from ledger.documents.placeholders import find_placeholders

REPOSITORY: Final = "https://git.example.org/acme/app"
REVISION: Final = "1d2f98184d23c99cf7b660efabdcf55a24b57aa0"
# hint (the text after the marker) -> the value an author writes there
VALUES: Final[dict[str, Any]] = {
    "the URL of the source repository the task is about": REPOSITORY,
    "the commit id of the source revision the task is about": REVISION,
    "URL@COMMIT of the source": f"{REPOSITORY}@{REVISION}",
    "a path or glob the change may touch": "a.py",
    "what the worker must achieve, in one or two sentences": (
        "Call checked_call, not unchecked_call."
    ),
    "who wrote this WorkUnit": "the tests",
    "an exact whole line the patch must add": "x = checked_call()",
    "text an added line must contain": "checked_call(",
    "text a removed line must contain": "unchecked_call(",
    "a wrong change the plan must reject, and why": "Keeping unchecked_call must be rejected.",
    "a one-line title": "A test cohort",
    "what this cohort measures": "Whether the ledger judges by the plan it froze.",
}
# A placeholder key: the whole object it stands in becomes this value.
KEYS: Final[dict[str, Any]] = {"the exact JSON document the candidate must be": {"ok": True}}


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def fill(path: Path) -> int:
    """Replace every placeholder in the JSON file ``path``; how many were replaced."""
    doc = json.loads(path.read_text("utf-8"))
    found = find_placeholders(doc).listed
    for item in found:
        tokens = _tokens(item.pointer)
        parent: Any = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if item.text == last and isinstance(parent, dict) and last in parent:  # a key
            holder: Any = doc
            for token in tokens[:-2]:
                holder = holder[int(token)] if isinstance(holder, list) else holder[token]
            holder[tokens[-2]] = KEYS[item.what]
        elif isinstance(parent, list):
            parent[int(last)] = VALUES[item.what]
        else:
            parent[last] = VALUES[item.what]
    path.write_text(json.dumps(doc, indent=2) + "\n", "utf-8")
    return len(found)


def fill_cohort(folder: Path, root: Path, hidden: Path | None = None) -> int:
    """Fill the placeholders of a cohort folder: cohort.json, the WorkUnits and public plans its
    tasks name (ROOT-relative), and the plans in ``hidden``; then ``ledger seal`` is due."""
    cohort = json.loads((folder / "cohort.json").read_text("utf-8"))
    files = {folder / "cohort.json"}
    for task in cohort["tasks"]:
        files.add(root / task["work_unit"]["path"])
        if "plan_path" in task["evaluator"]:
            files.add(root / task["evaluator"]["plan_path"])
    if hidden is not None:
        files |= set(hidden.glob("*.json"))
    return sum(fill(path) for path in sorted(files))
