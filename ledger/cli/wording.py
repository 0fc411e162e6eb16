"""Wording shared by the command modules: counts with the right plural."""


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``, ``0 files`` (``plural`` for an irregular noun)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
