"""Pre-outcome commitment: freeze, verify, burn and calibrate (one module each).

Rules (LEDGER.md section 5, "Rules enforced by structure"; codes in section 11):

1. A verifier runs only on a plan read back from the ledger: ``verify`` takes no plan argument;
   it finds the task whose frozen entry commits a plan for the bundle's WorkUnit.
2. ``verify`` refuses (nothing written) when no frozen cohort commits a plan for the bundle's
   WorkUnit, when several do and no ``cohort`` is given, when the cohort is burned, when ``task``
   names a task of another WorkUnit than the one the manifest names, or when the folder has no
   manifest at all (``task`` only names the task of a manifest that cannot say). Otherwise one
   transaction stores the bundle's files, appends ``bundle.observed``, runs the runner, stores the
   VerificationResult and appends ``verification.recorded``: both entries or neither.
3. A frozen cohort never changes: the same id with another definition is refused; re-freezing the
   identical definition is a no-op.
4. A burned cohort accepts no verification; its definition digest stays.
5. Exposure: a WorkUnit with a recorded outcome, or named as observed by a burn, is never again
   frozen as ``held_out``; exposure follows the WorkUnit's id (any version, any digest) as well as
   its digest. A cohort imported as burned with no machine-readable observed task exposes all its
   tasks.
6. Version binding: plan version -> exactly one adapter (``verifiers.runner.ADAPTERS``).
7. Freezing needs a green ``calibration.recorded`` (the latest one) for every adapter version
   the cohort uses.
8. Every state check that decides a write runs inside the write transaction, under the lock,
   on the derived state (``ledger.state.StateIndex``). ``verify`` judges before the lock and
   re-checks under it (``judge``, ``record``): the same task chosen, rule 9 still passing, and
   the result re-run with the entries' time if a later entry moved it on.
9. Outcome before plan: ``verify`` refuses a bundle whose manifest or candidate artifact bytes were
   observed in this ledger before the freeze of the cohort it is verified against
   (``outcome_digests``, shared with the audit; ``StateIndex.observed_before``, the derived
   copy of the audit's ``LedgerState.observed_before``).
10. Anchoring: before ``verify`` records a verdict it looks for an anchor over the freeze of the
   plan that judged it (``verify.AnchorRule``): under a trust file's anchoring policy, a
   ``checkpoint.witnessed`` entry meeting the policy (checked by ``ledger.transparency``,
   passed in by ``ledger.api``), else refused with ``plan-not-anchored``, nothing written
   (``--unanchored`` records it all the same); without a policy, any such entry whose tree
   holds the freeze, else the verdict is recorded with a warning that ``ledger when`` can
   never hold for it.

``check_result`` writes nothing: it judges a bundle as ``verify`` does (rules 1 and 2's task
choice, a burned cohort's plan included) and compares the judgement with a VerificationResult
the reference produced (LEDGER.md section 12, "Checking a result the reference produced").

A batch (``batch.verify_many``) is N verifies: judged in worker processes, each re-checked and
appended in bundle order by the parent, every pair whole (LEDGER.md section 5, "Batch verify").
"""
