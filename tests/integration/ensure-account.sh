#!/bin/sh
# CTest fixture setup: make sure the unprivileged account the integration suite runs its
# clients as exists. Idempotent; needs root (the suite as a whole does).
set -eu
ACCOUNT="${PTYVISOR_TEST_ACCOUNT:-ptyvisor-test}"
if id "$ACCOUNT" >/dev/null 2>&1; then
    exit 0
fi
useradd --system --create-home --shell /bin/sh "$ACCOUNT"
id "$ACCOUNT"
