"""Skeleton placeholders: the marker ``ledger new`` writes where a value is the author's to
write, and the scan ``lint`` and ``freeze`` make so that none is ever frozen (LEDGER.md section
14, "Placeholders").

A placeholder is a string, an object's value or one of its keys, that holds ``MARKER``; the text
after the marker says what to put there. The skeleton writes every value it cannot know this
way, the source repository and revision too when ``--repository`` / ``--revision`` are not
given. The values earlier skeletons wrote without the marker (an example.org URL, the all-zero
revision, a ``REPLACE/...`` path, a ``REPLACE`` key) are recognised as well, so a folder written
by an older ``ledger new`` cannot be frozen with them either. Pure: a JSON value in, the
placeholders in it out, in document order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from verifiers.contracts.common import escape_pointer

# The one marker: the skeleton writes it, the scan looks for it. With the colon it does not
# occur in code a plan may require (``REPLACE INTO`` in SQL, ``str.replace``).
MARKER: Final = "REPLACE:"

# What earlier skeletons wrote as placeholders without the marker, and what to put there.
RETIRED: Final = {
    "https://example.org/your/repository.git": "the URL of the source repository",
    "0" * 40: "the commit id of the source revision the task is about",
    "REPLACE/path/the/change/may/touch.py": "a path or glob the change may touch",
    "REPLACE": "the exact JSON document the candidate must be",
}


def placeholder(what: str) -> str:
    """The placeholder for a value the author writes: the marker, then what to put there."""
    return f"{MARKER} {what}"


def is_placeholder(text: str) -> bool:
    return what_to_put(text) is not None


def what_to_put(text: str) -> str | None:
    """What belongs where ``text`` stands when a skeleton wrote it (else None)."""
    at = text.find(MARKER)
    if at >= 0:
        return text[at + len(MARKER) :].strip() or "your own value"
    retired = RETIRED.get(text)
    if retired is None and "@" in text:
        # A locator ``URL@REVISION`` built from the old defaults.
        halves = text.rsplit("@", 1)
        retired = next((RETIRED[h] for h in halves if h in RETIRED and h != "REPLACE"), None)
    return retired


# How much of a document's placeholders is listed: as many as ``every_error`` lists contract
# errors, and their pointers within a budget (a pointer is as long as the keys above it: a
# hostile document of long keys must not make the list cost its size again per placeholder).
MAX_LISTED: Final = 200
_MAX_LISTED_CHARS: Final = 1 << 20
_SHOWN_CHARS: Final = 200  # of a placeholder's text and of what to put there


@dataclass(frozen=True, slots=True)
class Placeholder:
    pointer: str  # JSON pointer of the value (of the member, for a key)
    text: str  # the placeholder as written (its first 200 characters)
    what: str  # what to put there


@dataclass(frozen=True, slots=True)
class Placeholders:
    listed: tuple[Placeholder, ...]  # the first ones, in document order
    total: int  # every placeholder of the document


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def find_placeholders(document: object) -> Placeholders:
    """The placeholders of a JSON value (its strings and keys), in document order: the first
    ``MAX_LISTED`` listed, all counted. Iterative, each value visited once; a pointer is built
    only for a placeholder listed."""
    listed: list[Placeholder] = []
    total = chars = 0
    # Pointers as parent links (index of the parent's node, its reference token), joined on use.
    nodes: list[tuple[int, str]] = [(-1, "")]
    stack: list[tuple[int, object]] = [(0, document)]
    while stack:
        node, value = stack.pop()
        if isinstance(value, str):
            what = what_to_put(value)
            if what is None:
                continue
            total += 1
            if len(listed) < MAX_LISTED and chars <= _MAX_LISTED_CHARS:
                pointer = _pointer(nodes, node)
                chars += len(pointer)
                listed.append(Placeholder(pointer, _shown(value), _shown(what)))
        elif isinstance(value, dict | list):
            children: list[tuple[int, object]] = []
            members = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in members:
                nodes.append((node, str(key)))
                if isinstance(key, str):
                    children.append((len(nodes) - 1, key))  # a key is listed where its member is
                children.append((len(nodes) - 1, item))
            stack.extend(reversed(children))
    return Placeholders(tuple(listed), total)


def _pointer(nodes: list[tuple[int, str]], node: int) -> str:
    tokens = []
    while node > 0:
        node, token = nodes[node]
        tokens.append(escape_pointer(token))
    return "".join("/" + token for token in reversed(tokens))
