"""``python -m ledger``: the same as the ``ledger`` command."""

from ledger.cli.main import main

main()
