#!/usr/bin/env bash
# `make demo`: the main job on the embedded default, in a fresh temporary ledger.
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LEDGER_DB="$work/demo.db"
echo "== ledger init ($LEDGER_DB)"
ledger init --origin demo.evidence-ledger.example/demo
echo "== ledger log"
ledger log
echo "== ledger audit"
ledger audit
