"""The documents the ledger itself defines: the BenchmarkCohort and the burn notice (``cohort``),
and reading a cohort folder with every document it names (``cohort_folder``). The verifier-owned
documents (WorkUnit, plan, manifest, result) are in ``verifiers.contracts``.
"""
