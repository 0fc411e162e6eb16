"""The shapes of every command's ``--json`` output, as Structs: ``schemas/output-*.schema.json``
is generated from them (``python -m tools.schemas``) and the tests validate real outputs
against those files (LEDGER.md section 11, "Machine-readable outputs")."""
