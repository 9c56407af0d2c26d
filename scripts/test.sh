#!/usr/bin/env bash
# The one command that runs every test of idemgate on a fresh machine with Go
# installed. It installs and starts what the tests need (PostgreSQL from Debian's
# packages, stripe-mock from the Go module proxy, chromium from Debian's packages for
# the console's browser tests) and stops it afterwards.
#
#   scripts/test.sh            # all tests
#   scripts/test.sh -run Gate  # extra flags go to `go test`
#
# It runs every go test (both modules, then the race pass) even when one fails,
# and ends with one line counting every test and subtest of all of them:
# `N passed, N failed` (`, N skipped` when some were), after the failures' output.
# The exit status is 1 when anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--inner" ]; then
	shift
else
	if [ -x scripts/stripe-mock.sh ]; then
		scripts/stripe-mock.sh install
	fi
	if [ -x scripts/chromium.sh ]; then
		CHROMIUM=$(scripts/chromium.sh install)
		export CHROMIUM
	fi
	if [ -x scripts/with-postgres.sh ]; then
		exec scripts/with-postgres.sh "$0" --inner "$@"
	fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/testsummary" ./internal/testsummary
events="$work/events.json"
status=0

"$work/testsummary" run "$events" all -- go test -json -count=1 -timeout 25m "$@" ./... || status=1
# contrib/otel is a module of its own (the root module stays free of OpenTelemetry).
(cd contrib/otel && "$work/testsummary" run "$events" contrib/otel -- go test -json -count=1 ./...) || status=1
# The concurrency-heavy core once more under the race detector.
"$work/testsummary" run "$events" race -- go test -json -count=1 -race -timeout 10m "$@" \
	./interceptor/... ./store/... ./internal/... ./idemhttp/... ./vendorsim/... || status=1

"$work/testsummary" report "$events" || status=1
exit "$status"
