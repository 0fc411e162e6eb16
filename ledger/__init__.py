"""The evidence ledger: append-only, hash-chained, content-addressed records of frozen cohorts,
plans, result bundles and verification results, with audits and transparency proofs."""

__version__ = "0.1.0"
