"""The command line: ``main`` is the console script (light: ``--version`` imports nothing else),
``commands`` the typer application. The only part of ``ledger`` that prints or exits.
"""
