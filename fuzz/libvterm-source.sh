#!/usr/bin/env bash
# fuzz/libvterm-source.sh DIR -- puts the source of the libvterm this machine runs (Debian's
# libvterm0, 0.1.4 on Debian 12) in DIR/libvterm-VERSION and prints that path.
#
# Why: fuzz_screen feeds libvterm, and Debian's shared library is not instrumented, so a bad
# write inside it shows up (if at all) as a crash far from the write, in a later input. Built
# from the same source with the sanitizers and the fuzzer's coverage (fuzz/CMakeLists.txt,
# PTYVISOR_FUZZ_LIBVTERM_SOURCE), the fuzzer sees into it and ASan names the faulty line.
# apt checks the archive's signature and the files' hashes; the source list is a private one,
# so the machine's apt configuration is left as it was.
set -euo pipefail
dest="${1:?usage: $0 DIR}"
version="$(dpkg-query -W -f='${source:Version}' libvterm0)"
upstream="${version%%-*}"
if [ -f "$dest/libvterm-$upstream/src/state.c" ]; then
    echo "$dest/libvterm-$upstream"
    exit 0
fi
mkdir -p "$dest"
apt_dir="$(mktemp -d "${TMPDIR:-/tmp}/ptyvisor-apt.XXXXXX")"
trap 'rm -rf "$apt_dir"' EXIT
mkdir -p "$apt_dir/lists/partial"
# The mirrors and suites the machine's own binary sources name, as deb-src lines (one-line
# .list files and deb822 .sources files both).
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && cat "$f" && echo
done | awk '
    /^deb /         { $1 = "deb-src"; print; next }
    /^URIs:/        { uri = $2 }
    /^Suites:/      { $1 = ""; suites = $0 }
    /^Components:/  { $1 = ""; components = $0 }
    /^[[:space:]]*$/ { if (uri != "") { n = split(suites, s, " "); for (i = 1; i <= n; i++) print "deb-src " uri " " s[i] components }
                       uri = "" }
' | sort -u > "$apt_dir/sources.list"
opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State::Lists=$apt_dir/lists" -o APT::Sandbox::User=root -q)
apt-get "${opts[@]}" update >&2
(cd "$apt_dir" && apt-get "${opts[@]}" source --download-only "libvterm=$version" >&2)
tar -xzf "$apt_dir/libvterm_$upstream.orig.tar.gz" -C "$dest"
test -f "$dest/libvterm-$upstream/src/state.c"
echo "$dest/libvterm-$upstream"
