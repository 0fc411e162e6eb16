"""The sandbox of EvaluatorPlan v0.5 (LEDGER.md section 10, "The sandbox"; SECURITY.md).

``bwrap.py`` runs a plan's test command over a prepared tree inside Debian's bubblewrap and
reports what the harness itself observed (``verifiers.observations.RunObservation``);
``environment.py`` names and checks, by digest, everything the sandbox's read-only world holds;
``harness/`` is mounted read-only at ``/harness`` in every run: ``enter.py`` copies the tree into
the run's size-limited tmpfs before any candidate code runs, ``unittest_report.py`` runs the
plan's unittest ids and writes the report channel. Imports only errors, settings and verifiers.
"""
