#!/usr/bin/env bash
# price-table.sh — every row of the price targets (issue 11, store/BENCHMARKS.md) in one run.
#
# Runs, one after another on this machine, against one throwaway PostgreSQL
# (scripts/with-postgres.sh):
#   1. the price harness: a bare and gated worker processes side by side on an
#      in-process Temporal server, SQLite (claim and strict durability) and PostgreSQL,
#      regular and local activities, read / idempotent / destructive, with a bare
#      synced SQLite insert timed in every round; it prints the targets it can judge;
#   2. the store benchmark: claim and claim+complete against bare inserts, SQLite 1 and 32
#      workers (claim and strict), PostgreSQL 1 and 32 workers;
#   3. the WAL a step writes (SQLite pages, PostgreSQL bytes);
#   4. a claim with FILL records and receipts stored against an empty store (default
#      10,000,000; FILL=1000000 for a quicker look), SQLite and PostgreSQL.
# Prints markdown to stdout, progress to stderr. Takes about 25 minutes with FILL at 10 M.
# Run it on a quiet machine: the ratios are side by side, but a loaded machine widens them.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${IDEMGATE_POSTGRES_DSN:-}" ]; then
	exec scripts/with-postgres.sh "$0" "$@"
fi
fill=${FILL:-10000000}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/faultreport" ./integration/faults/faultreport
go build -o "$bin/storebench" ./store/storebench
echo "# idemgate price table: $(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
"$bin/faultreport" -matrix=false -rounds "${ROUNDS:-7}"
echo "## Store: claim durability (default)"
echo
"$bin/storebench" -backend all -d 6s -rounds 12 -workers 1,32 -sqlite-workers 1,32
echo
echo "## Store: strict durability, SQLite"
echo
"$bin/storebench" -backend sqlite -d 6s -rounds 12 -sqlite-workers 1,32 -durability strict
echo
echo "## WAL per step"
echo
"$bin/storebench" -backend all -wal 100
echo
echo "## Claim with $fill records and receipts stored"
echo
"$bin/storebench" -backend sqlite -fill "$fill"
echo
"$bin/storebench" -backend postgres -fill "$fill"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
