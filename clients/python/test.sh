#!/bin/bash
# clients/python/test.sh [BUILD_DIR] -- the Python client's suite against a real daemon.
#
# Run as root, from any directory. Runs lint.sh (mypy, flake8) first. Installs the package the
# way its README says (a venv on Debian's python3 with --system-site-packages, for
# python3-pytest and python3-pexpect; pip offline: --no-index --no-build-isolation, setuptools
# from Debian) into a fresh 0755 temp directory the test account can read, copies the tests
# and examples beside it, and runs pytest through scripts/with-daemon.sh --build BUILD_DIR
# (default: build/default of the repository). Further arguments go to pytest. Exits with
# pytest's status, or 1 when a test was skipped that tests/skip-allowlist.txt does not allow,
# or none ran.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build/default}"
[ $# -gt 0 ] && shift   # the rest goes to pytest
python=/usr/bin/python3   # Debian's: the test account must be able to run it

# The static checks first: a type error or an unused import fails the suite.
"$here/lint.sh"

work=$(mktemp -d /tmp/ptyvisor-python.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
# Build from a copy, so that the source tree gets no build/ or egg-info.
cp -r "$here" "$work/src"
rm -rf "$work/src/build" "$work/src/"*.egg-info "$work/src/src/"*.egg-info
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --quiet --no-index --no-build-isolation "$work/src"
# The conformance corpus, beside the tests that read it (tests/test_conformance.py).
cp -r "$root/protocol/conformance" "$work/src/tests/conformance"
chmod -R a+rX "$work"

# pytest exits 0 over skips: its JUnit report fails the run on a skip that
# tests/skip-allowlist.txt does not allow (tests/check-results.py). It runs as the test account.
"$root/scripts/ensure-test-account.sh"
install -d -o ptyvisor-test -m 0755 "$work/reports"
cd "$work/src"
status=0
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$root/scripts/with-daemon.sh" --build "$build" --config-extra "$here/with-daemon.toml" -- \
  "$work/venv/bin/python" -m pytest -p no:cacheprovider -v --junitxml="$work/reports/pytest.xml" tests "$@" || status=$?
python3 "$root/tests/check-results.py" pytest "$work/reports/pytest.xml" || { [ "$status" != 0 ] || status=1; }
exit "$status"
