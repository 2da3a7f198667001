#!/bin/bash
# console/vendor.sh [--check]
#
# Copies the distributed files of the page's libraries (pinned in package.json and
# package-lock.json) into assets/vendor/, which is committed: the C++ build embeds assets/ into
# the `ptyvisor` binary, so neither the build nor the console needs the network. The packages
# are installed with `npm ci --ignore-scripts` in a temporary copy, so no package code runs and
# this directory's node_modules/ (the test tools) is neither used nor changed.
#
# --check re-derives the files into a temporary directory and fails if any byte, or the list
# of files, differs from assets/vendor/ (CI runs it: a hand-edited vendored file, or a
# package.json bump without re-vendoring, is caught).
#
# The ES module builds are copied under a .js name: the server's content type comes from the
# extension and module scripts need a JavaScript type. Bytes are copied unchanged.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

tmp=$(mktemp -d /tmp/ptyvisor-console-vendor.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$tmp/"
# Only the runtime libraries: the test tools (devDependencies) are not vendored.
(cd "$tmp" && npm ci --ignore-scripts --omit=dev --no-audit --no-fund --loglevel=error >/dev/null)

out="$tmp/vendor"
mkdir -p "$out"
m="$tmp/node_modules"
# source (in node_modules)                              destination (in assets/vendor)
files=(
  "@xterm/xterm/lib/xterm.mjs"                            xterm.js
  "@xterm/xterm/css/xterm.css"                            xterm.css
  "@xterm/xterm/LICENSE"                                  LICENSE-xterm.txt
  "@xterm/addon-fit/lib/addon-fit.mjs"                    addon-fit.js
  "@xterm/addon-fit/LICENSE"                              LICENSE-addon-fit.txt
  "asciinema-player/dist/bundle/asciinema-player.min.js"  asciinema-player.js
  "asciinema-player/dist/bundle/asciinema-player.css"     asciinema-player.css
  "asciinema-player/LICENSE"                              LICENSE-asciinema-player.txt
)
for ((i = 0; i < ${#files[@]}; i += 2)); do
  install -m 0644 "$m/${files[i]}" "$out/${files[i+1]}"
done
# Which version each file came from, for a reader of the tree (and part of --check).
(cd "$m" && for p in @xterm/xterm @xterm/addon-fit asciinema-player; do
  node -e 'const p=require(process.argv[1]);console.log(p.name+" "+p.version+" "+p.license)' "./$p/package.json"
done) > "$out/VERSIONS.txt"

dest="$here/assets/vendor"
if [ "$check" = 1 ]; then
  if ! diff -r "$out" "$dest" >/dev/null 2>&1; then
    echo "vendor.sh --check: assets/vendor/ differs from what package-lock.json gives:" >&2
    diff -rq "$out" "$dest" >&2 || true
    echo "run console/vendor.sh and commit the result" >&2
    exit 1
  fi
  echo "vendor.sh --check: assets/vendor/ matches package-lock.json"
  exit 0
fi
rm -rf "$dest"
mkdir -p "$dest"
cp -p "$out"/* "$dest/"
echo "vendor.sh: $(ls "$dest" | wc -l) files in $dest"
