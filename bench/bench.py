#!/usr/bin/env python3
"""ptyvisor benchmark suite (docs/performance.md). Run it through bench/run.sh.

Every benchmark runs its contenders side by side, interleaved (round r runs them in an order
rotated by r), repeats, and reports medians and ratios against the physical limit (a
forkpty() reader in bench/termbench). Throughput samples count only with the exact byte
count the terminal must relay, and nothing is retried: a failed sample fails its contender.
"ptyvisor-raw" is termbench's raw protocol client; "ptyvisor (CLI)" is `ptyvisor run`. Results: DIR/results.json, DIR/results.csv,
DIR/results.md and DIR/performance.png. Every run records its start and end (UTC), the commit and
the load average at both; one whose 1-minute load average at its start or end was above half
the CPUs says "overlapped other work (load X)" in results.md and in its last printed line.
The daemon is measured as ptyvisord and its screen worker (ptyvisor-screen), each on its own
and both together.

The persistent-session benchmarks (idle-sessions, replay, observers) use bench/sessionbench,
a raw protocol client of version 2, and measure against the goals of docs/performance.md,
"Persistent sessions": they have no forkpty contender.

Everything is bounded in time, and every process started here is stopped by PID on exit.
"""
import argparse
import os
import resource
import signal
import sys
import time

from ptybench.common import ROOT, ALL, REQUIRED, PERSISTENT, log, Failure
from ptybench.benchmarks.cost import Cost
from ptybench.benchmarks.fairness import Fairness
from ptybench.benchmarks.latency import Latency
from ptybench.benchmarks.memory import Memory
from ptybench.benchmarks.persistent import Persistent
from ptybench.benchmarks.start import Start
from ptybench.benchmarks.throughput import Throughput
from ptybench.harness import Harness
from ptybench.plot import Plot
from ptybench.report import Report


class Suite(Harness, Memory, Persistent, Throughput, Latency, Fairness, Start, Cost, Report, Plot):
    """The whole suite: the harness, every benchmark (bench_NAME for each NAME of ALL), the
    reports and the plot."""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round; under 2 minutes")
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(ALL))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build/bench"))
    ap.add_argument("--rounds", type=int, default=0, help="repetitions (default 5, 1 with --smoke)")
    ap.add_argument("--bytes", type=int, default=0, help="throughput size (default 128 MiB, 4 MiB with --smoke)")
    ap.add_argument("--idle-sessions", type=int, default=0,
                    help="sessions of each kind in idle-sessions (default 1000, 50 with --smoke)")
    ap.add_argument("--no-ssh", action="store_true")
    ap.add_argument("--no-systemd", action="store_true")
    ap.add_argument("--baseline", default="", help="a directory with ptyvisord and ptyvisor of another commit: "
                    "throughput and fairness measure them too, as \"ptyvisor (baseline CLI)\", interleaved with "
                    "this build's")
    args = ap.parse_args()
    only = [x for x in args.only.split(",") if x] or ALL
    bad = [x for x in only if x not in ALL]
    if bad:
        ap.error(f"unknown benchmark(s): {','.join(bad)}; choose from {','.join(ALL)}")
    if os.geteuid() != 0:
        ap.error("must run as root (ptyvisord runs as root)")
    os.makedirs(args.out, exist_ok=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    suite = Suite(args)
    stop = lambda *_: (_ for _ in ()).throw(KeyboardInterrupt())  # noqa: E731
    signal.signal(signal.SIGTERM, stop)
    t0 = time.time()
    suite.begin_run()
    try:
        suite.start_daemon()
        if "throughput" in only or "start" in only or "fairness" in only:
            if args.no_ssh:
                suite.skip("throughput", "ssh", "--no-ssh")
            elif "throughput" in only or "fairness" in only:
                why = suite.setup_ssh()
                if why:
                    suite.skip("throughput", "ssh", why)
            if args.no_systemd:
                suite.skip("throughput", "systemd-run", "--no-systemd")
            elif "throughput" in only or "start" in only:
                why = suite.setup_harness()
                if why:
                    suite.skip("throughput", "systemd-run", why)
        for name in ALL:
            if name not in only:
                continue
            log(f"--- {name}")
            b0 = time.time()
            try:
                getattr(suite, f"bench_{name.replace('-', '_')}")()
            except Failure as e:
                suite.fail(name, "ptyvisor", str(e))
            log(f"--- {name} took {time.time() - b0:.1f} s")
            suite.note_load(f"after {name}")
    except KeyboardInterrupt:
        suite.fail("suite", "run.sh", "interrupted")
    except Failure as e:
        suite.fail("suite", "ptyvisor", str(e))
    finally:
        if suite.daemon and suite.daemon.poll() is not None:
            suite.fail("suite", "ptyvisor", f"ptyvisord exited with {suite.daemon.returncode} during the run")
        suite.end_run()
        try:
            suite.write_reports(sys.argv[1:])
        finally:
            suite.stop_all()
    log(f"done in {time.time() - t0:.1f} s; results in {args.out}/results.md")
    with open(os.path.join(args.out, "results.md")) as f:
        print(f.read())
    r = suite.run_record
    print(f"Run {r['start']} to {r['end']}, commit {r['commit_short'] or 'unknown'}{'-dirty' if r['dirty'] else ''}; "
          f"1-minute load average {r['loadavg_1m']['start']:.2f} at the start, {r['loadavg_1m']['end']:.2f} at the end"
          + (f": {r['overlap_note']}" if r["overlapped"] else ""), flush=True)
    broken = [f for f in suite.failures if f["contender"] in REQUIRED or f["bench"] in ("suite", *PERSISTENT)]
    for f in suite.failures:
        log(f"failure: {f['bench']}/{f['contender']}: {f['reason']}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
