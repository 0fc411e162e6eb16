"""Authoring: writing cohorts and result bundles (LEDGER.md section 14).

``skeleton`` (``ledger new cohort`` / ``new task``), ``seal`` (every digest and binding of a
cohort folder, in dependency order), ``lint`` (every contract error at once, the checks of
``freeze`` in its order), ``digest`` (the two digest kinds the formats use) and ``bundle_pack``
(a reference-shaped result bundle from a git repository, running git and never the candidate).
Functions return what they would write; the CLI writes it. Nothing here prints.
"""
