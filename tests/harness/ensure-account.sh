#!/bin/bash
# ensure-account.sh [NAME] - make sure the unprivileged test account exists (default
# ptyvisor-test): a system account without a home directory and with a login shell, so
# that sessions can run /bin/sh as it. Idempotent; needs root to create it.
set -euo pipefail
NAME=${1:-ptyvisor-test}
if getent passwd "$NAME" >/dev/null; then exit 0; fi
[ "$(id -u)" = 0 ] || { echo "ensure-account.sh: must run as root to create $NAME" >&2; exit 1; }
useradd --system --no-create-home --home-dir /nonexistent --shell /bin/sh "$NAME" 2>/dev/null ||
    getent passwd "$NAME" >/dev/null   # lost a race with a concurrent run: fine
