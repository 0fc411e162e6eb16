"""The verifier-owned unittest runner: runs the given unittest ids, reports on the report channel.

Run inside the sandbox as ``python -I -B /harness/unittest_report.py ID...`` with the tree as the
working directory. It writes one JSON document, ``{"nonce": N, "tests": {id: status}}``, to the
file descriptor ``LEDGER_REPORT_FD``, ``N`` being ``LEDGER_REPORT_NONCE`` (random per run). The
harness outside reads that pipe bounded and trusts nothing else the run prints. Stdlib only.

Code under test runs in this process and can reach the channel (SECURITY.md, "What a candidate
inside the tests can do"): the nonce and the descriptor are taken out of reach of child
processes and naive code (removed from the environment, the descriptor moved and marked
close-on-exec), which stops accidents and lazy forgeries, not a determined one.
"""

from __future__ import annotations

import json
import os
import sys
import unittest

_STATUSES = ("passed", "skipped", "failed", "error")  # from best to worst


class _Recorder(unittest.TestResult):
    """Records one status per test id; the first non-pass outcome of a test wins."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: dict[str, str] = {}

    def _set(self, test: unittest.TestCase, status: str) -> None:
        key = test.id()
        if self.statuses.get(key, "passed") == "passed":
            self.statuses[key] = status

    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        self._set(test, "passed")

    def addFailure(self, test: unittest.TestCase, err: object) -> None:
        self.failures.append((test, ""))
        self._set(test, "failed")

    def addError(self, test: unittest.TestCase, err: object) -> None:
        self.errors.append((test, ""))
        self._set(test, "error")

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        super().addSkip(test, reason)
        self._set(test, "skipped")

    def addExpectedFailure(self, test: unittest.TestCase, err: object) -> None:
        self._set(test, "failed")  # an expected failure is not a pass of the plan's test

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        self._set(test, "failed")

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: object) -> None:
        if err is not None:
            self._set(test, "failed")


def _take_channel() -> tuple[int, str]:
    fd_text = os.environ.pop("LEDGER_REPORT_FD", "")
    nonce = os.environ.pop("LEDGER_REPORT_NONCE", "")
    if not fd_text.isdigit() or not nonce:
        raise OSError("no report channel")
    fd = int(fd_text)
    moved = os.dup(fd)  # out of the numbered slot the environment named; not inherited
    os.close(fd)
    os.set_inheritable(moved, False)
    return moved, nonce


def main(ids: list[str]) -> int:
    """Run ``ids`` and write the report; the exit status is 0 only when every test passed."""
    fd, nonce = _take_channel()
    # -I leaves the working directory off sys.path: the tree is where the tests import from.
    sys.path.insert(0, os.getcwd())
    loader = unittest.TestLoader()
    statuses: dict[str, str] = {}
    for test_id in ids:
        try:
            suite = loader.loadTestsFromName(test_id)
        except Exception:  # an id that does not load (import error, missing name) is an error
            statuses[test_id] = "error"
            continue
        recorder = _Recorder()
        suite.run(recorder)
        # The report names the plan's ids only: an id that did not run as itself (a name that
        # failed to load, a class) takes the worst status of what ran under it, else "error".
        seen = recorder.statuses
        if test_id in seen:
            statuses[test_id] = seen[test_id]
        elif seen:
            statuses[test_id] = max(seen.values(), key=_STATUSES.index)
        else:
            statuses[test_id] = "error"
    report = json.dumps({"nonce": nonce, "tests": statuses}, sort_keys=True)
    data = report.encode("utf-8")
    while data:
        data = data[os.write(fd, data) :]
    os.close(fd)
    return 0 if all(s == "passed" for s in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
