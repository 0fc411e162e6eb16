"""``python -m ledger``: the same as the ``ledger`` command."""

from .entry import main

main()
