"""Interoperability: the ledger's evidence in the formats other tools read (in-toto/SLSA
attestations; LEDGER.md section 7)."""
