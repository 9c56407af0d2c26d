#!/usr/bin/env bash
# The one command that runs every test of idemgate on a fresh machine with Go
# installed. It installs and starts what the tests need (PostgreSQL from Debian's
# packages, stripe-mock from the Go module proxy) and stops it afterwards.
#
#   scripts/test.sh            # all tests
#   scripts/test.sh -run Gate  # extra flags go to `go test`
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--inner" ]; then
	shift
else
	if [ -x scripts/stripe-mock.sh ]; then
		scripts/stripe-mock.sh install
	fi
	if [ -x scripts/with-postgres.sh ]; then
		exec scripts/with-postgres.sh "$0" --inner "$@"
	fi
fi

go test -count=1 -timeout 25m "$@" ./...
# contrib/otel is a module of its own (the root module stays free of OpenTelemetry).
(cd contrib/otel && go test -count=1 ./...)
# The concurrency-heavy core once more under the race detector.
go test -count=1 -race -timeout 10m "$@" ./interceptor/... ./store/... ./internal/... ./idemhttp/... ./vendorsim/...
