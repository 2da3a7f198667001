#!/usr/bin/env bash
# Builds the libFuzzer targets with the "fuzz" preset and runs each one.
#
#   fuzz/run.sh [--merge] [SECONDS_PER_TARGET]     (default 20)
#   fuzz/run.sh --build-only                        (builds the targets, runs none: CI builds
#                                                    them while other tests run)
#
# Each target starts from a copy of its checked-in corpus (fuzz/corpus/<target>/) in a
# temporary directory, so the repository is not modified, unless --merge is given: then what
# the run found that adds coverage is merged back (libFuzzer -merge=1) into the checked-in
# corpus, to be committed. There, descriptive names are the hand-made seeds
# (fuzz/make_corpus.py) and hash names are inputs found by fuzzing. Prints the executions each target
# reached. Exits non-zero if any target crashed, leaked, hit a sanitizer report or a timeout;
# the crashing inputs are kept under $PTYVISOR_FUZZ_ARTIFACTS (default
# /tmp/ptyvisor-fuzz-artifacts) and can be replayed with `build/fuzz/fuzz/<target> <file>`.
#
# Other knobs (environment): PTYVISOR_FUZZ_MAX_LEN (default 16384), PTYVISOR_FUZZ_TARGETS
# (space-separated subset), PTYVISOR_FUZZ_JOBS (targets fuzzed at once; default: the CPUs).
set -euo pipefail

merge=0
build_only=0
if [ "${1:-}" = "--merge" ]; then
    merge=1
    shift
elif [ "${1:-}" = "--build-only" ]; then
    build_only=1
    shift
fi
seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
    echo "usage: $0 [--merge] [SECONDS_PER_TARGET] | --build-only" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

all_targets=(fuzz_frame_decoder fuzz_start fuzz_resize fuzz_signal fuzz_exit fuzz_error fuzz_started fuzz_status
             fuzz_session_payloads fuzz_screen)
read -r -a targets <<< "${PTYVISOR_FUZZ_TARGETS:-${all_targets[*]}}"
max_len="${PTYVISOR_FUZZ_MAX_LEN:-16384}"
artifacts="${PTYVISOR_FUZZ_ARTIFACTS:-/tmp/ptyvisor-fuzz-artifacts}"

# fuzz_screen fuzzes libvterm itself, built instrumented from Debian's source of the version
# installed (fuzz/libvterm-source.sh); without it, a bad write in the library goes unseen.
vterm_source=""
if [[ " ${targets[*]} " == *" fuzz_screen "* ]]; then
    vterm_source="$(fuzz/libvterm-source.sh "$root/build/libvterm-source")"
fi
cmake --preset fuzz -DPTYVISOR_FUZZ_LIBVTERM_SOURCE="$vterm_source"
# Only the fuzz targets: the rest of the tree is not needed to fuzz the protocol.
cmake --build --preset fuzz --target "${targets[@]}"
if [ "$build_only" = 1 ]; then
    exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/ptyvisor-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# Each target is one single-threaded process: PTYVISOR_FUZZ_JOBS of them (default: one per
# CPU) run side by side, each for its own SECONDS, so that the pass takes SECONDS x targets / jobs
# of wall time instead of SECONDS x targets, and no target gets less fuzzing for it. Their
# results are read afterwards, in the order of the list.
jobs="${PTYVISOR_FUZZ_JOBS:-$(nproc)}"
fuzz_one() {
    local target="$1" exe="build/fuzz/fuzz/$1" corpus="$work/$1/corpus" crashes="$work/$1/artifacts/"
    local rc=0
    "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
        -print_final_stats=1 -artifact_prefix="$crashes" "$corpus" > "$work/$target/log" 2>&1 || rc=$?
    echo "$rc" > "$work/$target/rc"
}
for target in "${targets[@]}"; do
    corpus="$work/$target/corpus"
    mkdir -p "$corpus" "$work/$target/artifacts/"
    if [ -d "fuzz/corpus/$target" ]; then
        cp -R "fuzz/corpus/$target/." "$corpus/"
    fi
    find "$corpus" -type f | wc -l > "$work/$target/seeds"
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n || true
    done
    echo "== $target: ${seconds}s from $(cat "$work/$target/seeds") seeds"
    fuzz_one "$target" &
done
wait

failed=()
summary=()
for target in "${targets[@]}"; do
    exe="build/fuzz/fuzz/$target"
    corpus="$work/$target/corpus"
    crashes="$work/$target/artifacts/"
    seeds="$(cat "$work/$target/seeds")"
    log="$work/$target/log"
    rc="$(cat "$work/$target/rc" 2>/dev/null || echo "?")"
    # libFuzzer ends a clean run with "Done N runs in S second(s)"; a crash has no such line,
    # then the last status line ("#N ...") tells how far it got.
    runs="$(grep -Eo 'Done [0-9]+ runs' "$log" | tail -n 1 | awk '{print $2}' || true)"
    if [ -z "$runs" ]; then
        runs="$(grep -Eo '^#[0-9]+' "$log" | tail -n 1 | tr -d '#' || true)"
    fi
    runs="${runs:-?}"
    entries="$(find "$corpus" -type f | wc -l)"
    if [ "$rc" != 0 ] || [ -n "$(ls -A "$crashes")" ]; then
        echo "!! $target FAILED (exit $rc) after $runs runs; log tail:"
        tail -n 40 "$log" | sed 's/^/   /'
        mkdir -p "$artifacts/$target"
        cp -R "$crashes." "$artifacts/$target/" 2>/dev/null || true
        echo "   crashing inputs copied to $artifacts/$target/"
        failed+=("$target")
        summary+=("$(printf '%-20s %12s runs  FAILED' "$target" "$runs")")
    else
        kept=""
        if [ "$merge" = 1 ]; then
            mkdir -p "fuzz/corpus/$target"
            before="$(find "fuzz/corpus/$target" -type f | wc -l)"
            # Edge coverage only (-use_counters=0): hit-count buckets would keep ten times
            # as many inputs for little more reach.
            "$exe" -merge=1 -use_counters=0 -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
                "fuzz/corpus/$target" "$corpus" > "$work/$target/merge.log" 2>&1 || {
                echo "!! $target: merge failed"; tail -n 20 "$work/$target/merge.log"; failed+=("$target"); }
            kept="; checked-in corpus $before -> $(find "fuzz/corpus/$target" -type f | wc -l)"
        fi
        summary+=("$(printf '%-20s %12s runs  corpus %d -> %d%s' "$target" "$runs" "$seeds" "$entries" "$kept")")
    fi
done

echo
echo "== summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -ne 0 ]; then
    echo "FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "all targets ran clean"
