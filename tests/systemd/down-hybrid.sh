#!/bin/bash
# down-hybrid.sh STATE_DIR - tests/harness/down.sh, then the v1 cgroups up-hybrid.sh made.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
S=$(realpath -m "${1:?usage: down-hybrid.sh STATE_DIR}")
cgs=$(cat "$S/cgroups-v1" 2>/dev/null || true)
"$HERE/../harness/down.sh" "$S"
for cg in $cgs; do
    case "$cg" in /sys/fs/cgroup/*/ptyvisor-harness-*) ;; *) continue ;; esac
    for _ in $(seq 50); do
        [ -d "$cg" ] || break
        find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
        [ -d "$cg" ] && sleep 0.1
    done
    [ -d "$cg" ] && echo "down-hybrid.sh: could not remove $cg" >&2
done
exit 0
