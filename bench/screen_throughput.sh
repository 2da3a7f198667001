#!/bin/bash
# Relay throughput with the screen on and off, in the same run: two daemons from the same
# build, one with [screen] enabled = false, measured alternately ROUNDS times with
# termbench (one session writing BYTES of text to its terminal, read by a raw client).
# Prints each sample (MB/s) and the ratio of the medians. Run as root.
#   bench/screen_throughput.sh [BUILD_DIR] [ROUNDS] [BYTES]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build/default}"; rounds="${2:-5}"; bytes="${3:-200000000}"
work=$(mktemp -d /tmp/ptyvisor-screen-tp.XXXXXX); chmod 0755 "$work"
trap 'rm -rf "$work"' EXIT
install -m 0755 "$build/bench/termbench" "$work/termbench"
printf '[screen]\nenabled = true\n' > "$work/on.toml"
printf '[screen]\nenabled = false\n' > "$work/off.toml"
# Text, not zeros: the emulator does real work for every byte.
cmd="yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c $bytes"
sample() {  # $1: on|off -> MB/s
  "$root/scripts/with-daemon.sh" --build "$build" --config-extra "$work/$1.toml" -- \
    sh -c "\"$work/termbench\" throughput --via ptyvisor --socket \"\$PTYVISOR_SOCKET\" --timeout 600 -- sh -c \"$cmd\"" |
    python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print("%.1f" % (j["bytes"]/j["seconds"]/1e6))'
}
on=(); off=()
for r in $(seq 1 "$rounds"); do
  a=$(sample on); b=$(sample off); on+=("$a"); off+=("$b")
  echo "round $r: screen on $a MB/s, screen off $b MB/s"
done
python3 - "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
on = [float(x) for x in sys.argv[1].split()]; off = [float(x) for x in sys.argv[2].split()]
print("median: on %.1f MB/s, off %.1f MB/s, ratio on/off %.2f" % (statistics.median(on), statistics.median(off), statistics.median(on) / statistics.median(off)))
PY
