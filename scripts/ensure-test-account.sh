#!/bin/bash
# The unprivileged account that the tests run sessions as (the agent's account in tests).
set -euo pipefail
name=${1:-ptyvisor-test}
id "$name" >/dev/null 2>&1 || useradd --system --create-home --shell /bin/sh "$name"
