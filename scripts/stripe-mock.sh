#!/usr/bin/env bash
# scripts/stripe-mock.sh [install] — installs stripe-mock (the real Stripe API mock the idemhttp tests drive with stripe-go) if
# it is missing, and prints its path. The tests find it in $STRIPE_MOCK, PATH or
# $(go env GOPATH)/bin; without it they skip, except under CI=true, where they fail.
set -euo pipefail
version=v0.203.0
if [ -n "${STRIPE_MOCK:-}" ] && [ -x "$STRIPE_MOCK" ]; then
  echo "$STRIPE_MOCK"
  exit 0
fi
if bin=$(command -v stripe-mock); then
  echo "$bin"
  exit 0
fi
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH | cut -d: -f1)/bin"
if [ ! -x "$gobin/stripe-mock" ]; then
  echo "installing stripe-mock $version into $gobin" >&2
  go install "github.com/stripe/stripe-mock@$version"
fi
echo "$gobin/stripe-mock"
