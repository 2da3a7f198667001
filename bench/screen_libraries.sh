#!/bin/bash
# The screen's library, by measurement: the same bytes in tmux (the reference), libvterm and
# libtsm; prints each library's throughput and how many rows differ from tmux's
# capture-pane. Needs tmux, libvterm-dev, libtsm-dev and the screen_libraries program:
#   g++ -std=c++20 -O2 -o /tmp/screen_libraries bench/screen_libraries.cpp -lvterm -ltsm
#   bench/screen_libraries.sh /tmp/screen_libraries INPUT_FILE...
set -euo pipefail
program=$1; shift
for f in "$@"; do
  sock=screenlib$$
  tmux -L "$sock" -f /dev/null new-session -d -x 80 -y 24 "stty raw -echo; cat '$f'; sleep 30"
  # Wait until the pane shows the whole file: its text stops changing.
  last=""; for _ in $(seq 1 100); do
    now=$(tmux -L "$sock" capture-pane -p); [ -n "$now" ] && [ "$now" = "$last" ] && break; last=$now; sleep 0.1
  done
  tmux -L "$sock" capture-pane -p > "$f.tmux"
  tmux -L "$sock" kill-server
  echo "== $f"
  "$program" 80 24 "$f" 200
  echo "libvterm rows differing from tmux: $(diff "$f.tmux" "$f.vterm" | grep -c '^<' || true)"
  echo "libtsm   rows differing from tmux: $(diff "$f.tmux" "$f.tsm" | grep -c '^<' || true)"
done
