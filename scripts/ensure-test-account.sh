#!/bin/bash
# ensure-test-account.sh [NAME] - make sure the unprivileged account that tests and the demo
# run sessions as exists (default ptyvisor-test): a system account with a home and /bin/sh.
# Idempotent; needs root to create it. The one copy: every test suite and script calls this.
set -euo pipefail
name=${1:-ptyvisor-test}
getent passwd "$name" >/dev/null && exit 0
[ "$(id -u)" = 0 ] || { echo "ensure-test-account.sh: must run as root to create $name" >&2; exit 1; }
useradd --system --create-home --shell /bin/sh "$name" 2>/dev/null ||
    getent passwd "$name" >/dev/null   # lost a race with a concurrent run: fine
