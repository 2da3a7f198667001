#!/bin/bash
# clients/typescript/test.sh [BUILD_DIR]
#
# Builds the npm package (tsc and node-gyp from devDependencies, by its `prepare` script), runs
# lint.sh (tsc --noEmit, ESLint), packs it, checks that the tarball holds dist/ and the native
# module, installs the tarball with `npm install --offline` into a fresh 0755 directory
# (proving it needs no network and no compiler at install), and runs the suite there under Node and under Bun, as the test
# account, against a real daemon (scripts/with-daemon.sh --build BUILD_DIR). Run as root, from
# any directory. BUILD_DIR defaults to build/default of this repository.
# With --bench first, runs bench/client_bench.mjs under Node and Bun instead of the suite.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bench=0
if [ "${1:-}" = --bench ]; then bench=1; shift; fi
build="$(cd "${1:-$root/build/default}" && pwd)"

cd "$here"
# Both run the package's `prepare` script, which builds dist/ and the native module; `npm pack`
# would run it again, so it packs what was just built, with --ignore-scripts.
if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
# The static checks (tsc --noEmit, ESLint): a finding fails the suite.
[ "$bench" = 1 ] || "$here/lint.sh" "$here"
rm -f ptyvisor-*.tgz
tarball="$here/$(npm pack --silent --ignore-scripts | tail -n1)"
# What makes the package importable: without these it installs and then fails at import.
contents=$(tar -tzf "$tarball")
for needed in package/dist/index.js package/dist/index.d.ts package/prebuilds/linux-x64/sendfd.node; do
  if ! grep -qxF "$needed" <<<"$contents"; then
    echo "test.sh: $tarball lacks $needed" >&2
    exit 1
  fi
done

tmp=$(mktemp -d /tmp/ptyvisor-ts-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
cd "$tmp"
printf '{"name":"ptyvisor-ts-suite","private":true,"type":"module"}\n' > package.json
npm install --offline --no-audit --no-fund "$tarball"
# The reference implementation of the compatibility test, and Bun, from the dev install.
mkdir -p node_modules/@lydell bin
cp -r "$here/node_modules/@lydell/." node_modules/@lydell/
install -m 0755 "$(readlink -f "$here/node_modules/.bin/bun")" bin/bun
cp -r "$here/test" "$here/examples" "$here/bench" .
# The conformance corpus, beside the test that reads it (test/conformance.test.mjs).
cp -r "$root/protocol/conformance" test/conformance
chmod -R a+rX "$tmp"

if [ "$bench" = 1 ]; then
  extra=(--build "$build" --config-extra "$tmp/bench/daemon-extra.toml")
  "$root/scripts/with-daemon.sh" "${extra[@]}" -- node bench/client_bench.mjs
  "$root/scripts/with-daemon.sh" "${extra[@]}" -- "$tmp/bin/bun" bench/client_bench.mjs
  exit 0
fi

# Each runner also writes a JUnit report: a skipped test fails the run unless
# tests/skip-allowlist.txt allows it there (the node-pty half under Bun), since both runners
# exit 0 over skips (tests/check-results.py). The suites run as the test account, against a
# daemon that offers the sandbox profiles of test/daemon-extra.toml.
"$root/scripts/ensure-test-account.sh"
install -d -o ptyvisor-test -m 0755 "$tmp/reports"
status=0
echo "== node $(node --version)"
"$root/scripts/with-daemon.sh" --build "$build" --config-extra "$here/test/daemon-extra.toml" -- node --test --test-concurrency=1 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=junit --test-reporter-destination="$tmp/reports/node.xml" test/ || status=1
python3 "$root/tests/check-results.py" node "$tmp/reports/node.xml" || status=1
echo "== bun $("$tmp/bin/bun" --version)"
"$root/scripts/with-daemon.sh" --build "$build" --config-extra "$here/test/daemon-extra.toml" -- "$tmp/bin/bun" test \
  --reporter=junit --reporter-outfile="$tmp/reports/bun.xml" ./test/ || status=1
python3 "$root/tests/check-results.py" bun "$tmp/reports/bun.xml" || status=1
exit $status
