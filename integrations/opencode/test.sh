#!/bin/bash
# integrations/opencode/test.sh [BUILD_DIR]
#
# Builds and packs the TypeScript client (clients/typescript) and this plugin (which bundles
# the client), runs the static checks over the plugin's src/ (clients/typescript/lint.sh),
# installs the plugin's tarball into a fresh 0755 directory, and runs test/ there
# under Node and under Bun, as the test account, against a real daemon
# (scripts/with-daemon.sh --build BUILD_DIR). Run as root, from any directory. BUILD_DIR
# defaults to build/default of this repository.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build/default}" && pwd)"
client="$root/clients/typescript"

cd "$client"
# The client's `prepare` script builds it on npm ci/install; pack that build as it is.
if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
rm -f ptyvisor-*.tgz
npm pack --silent --ignore-scripts >/dev/null

cd "$here"
# npm ci: the lock file as it is, never rewritten. It pins no integrity for the client's
# tarball: that is built here, and its native module differs with the directory it is built
# in (a clone elsewhere failed with EINTEGRITY).
npm ci --no-audit --no-fund
# The client just packed, not the one the lock file saw.
npm install --no-audit --no-fund --no-save "$client/ptyvisor-0.1.0.tgz"
# The static checks (tsc --noEmit, ESLint; the client's lint.sh): a finding fails the suite.
"$client/lint.sh" "$here"
npm run build
rm -f ptyvisor-opencode-*.tgz
tarball="$here/$(npm pack --silent | tail -n1)"

tmp=$(mktemp -d /tmp/ptyvisor-opencode-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
cd "$tmp"
# The plugin's own override (package.json): ini 6, the code of ini 7 without its Node >= 22.
# An install without it gets ini 7, which npm warns about and which runs on Node 20 all the same.
printf '{"name":"ptyvisor-opencode-suite","private":true,"type":"module","overrides":{"ini":"6.0.0"}}\n' > package.json
npm install --prefer-offline --no-audit --no-fund "$tarball"
mkdir -p bin
install -m 0755 "$(readlink -f "$client/node_modules/.bin/bun")" bin/bun
cp -r "$here/test" .
chmod -R a+rX "$tmp"

# Both runners exit 0 over skipped tests: their JUnit reports are checked against
# tests/skip-allowlist.txt (tests/check-results.py). The suites run as the test account.
"$root/scripts/ensure-test-account.sh"
install -d -o ptyvisor-test -m 0755 "$tmp/reports"
status=0
echo "== node $(node --version)"
"$root/scripts/with-daemon.sh" --build "$build" -- node --test --test-concurrency=1 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=junit --test-reporter-destination="$tmp/reports/node.xml" test/ || status=1
python3 "$root/tests/check-results.py" opencode-node "$tmp/reports/node.xml" || status=1
echo "== bun $("$tmp/bin/bun" --version)"
"$root/scripts/with-daemon.sh" --build "$build" -- "$tmp/bin/bun" test \
  --reporter=junit --reporter-outfile="$tmp/reports/bun.xml" ./test/ || status=1
python3 "$root/tests/check-results.py" opencode-bun "$tmp/reports/bun.xml" || status=1
exit $status
