#!/bin/bash
# clients/python/lint.sh -- the static checks of the package and its tests; test.sh runs it
# first, so that a finding fails the suite (and CI). Debian's tools (scripts/install-deps.sh:
# python3-mypy, flake8), since CI reaches no PyPI. Their configuration: pyproject.toml
# ([tool.mypy]) and .flake8. Prints each check's name and how long it took.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
cache=$(mktemp -d /tmp/ptyvisor-mypy.XXXXXX)
trap 'rm -rf "$cache"' EXIT
check() {
  local name=$1 start=$SECONDS
  shift
  echo "== lint: $name"
  "$@"
  echo "== lint: $name passed in $((SECONDS - start))s"
}
check "mypy $(/usr/bin/python3 -m mypy --version | cut -d' ' -f2)" \
  /usr/bin/python3 -m mypy --cache-dir "$cache"
check "flake8 $(/usr/bin/python3 -m flake8 --version | head -n1 | cut -d" " -f1)" \
  /usr/bin/python3 -m flake8 src tests
