"""Hypothesis strategies that mutate a JSON document the way a hostile sender would: any
value at any place replaced by any JSON value, or removed. Used by the fuzzers of readers of
untrusted documents (attestations, exports), whose contract is a verdict or a refusal, never
an ``internal-error``."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

Path = tuple[str | int, ...]

JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


# A value of every JSON type, each one a confused reader meets first.
CONFUSIONS: tuple[Any, ...] = (
    5, -1, 2**63 - 1, 0.5, True, False, None, "", "x", [], [5], {}, {"x": 5},
)  # fmt: skip


def places(value: Any, here: Path = ()) -> Iterator[Path]:
    """Every place in ``value``: the root, each member and each item, depth first."""
    yield here
    if isinstance(value, dict):
        for key, item in value.items():
            yield from places(item, (*here, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from places(item, (*here, index))


def mutated(value: Any, data: st.DataObject, *, max_depth: int | None = None) -> Any:
    """A copy of ``value`` with one place replaced by another JSON value, or (not the root)
    removed. The depth (at most ``max_depth``), then a place at that depth, then one of the
    ``CONFUSIONS`` or a drawn value, each chosen uniformly by a drawn ``Random``: Hypothesis's
    own draws lean to the smallest choice (the root, null), and the few fields near the top a
    reader looks at must be as likely as the many below them."""
    rnd = data.draw(st.randoms(use_true_random=True), label="choices")
    every = list(places(value))
    deepest = max(len(p) for p in every)
    depth = rnd.randint(0, min(deepest, deepest if max_depth is None else max_depth))
    where = rnd.choice([p for p in every if len(p) == depth])
    remove = bool(where) and rnd.random() < 0.2
    if remove:
        new = None
    elif rnd.random() < 0.7:
        new = copy.deepcopy(rnd.choice(CONFUSIONS))
    else:
        new = data.draw(JSON_VALUES, label="value")
    if not where:
        return new
    out = copy.deepcopy(value)
    parent = out
    for step in where[:-1]:
        parent = parent[step]
    last = where[-1]
    if remove:
        del parent[last]
    else:
        parent[last] = new
    return out
