#!/usr/bin/env python3
"""The Python client (clients/python) against the C++ client (`$PTYVISOR_BIN run`), side by
side in one run, on the same daemon:

- start: wall time of one session of `true`, from nothing to its EXIT, p50/p99 over N.
  Python: ptyvisor.spawn("true") then wait(), in this process. C++: the `ptyvisor run -- true`
  process. A third line gives a fresh `python3 -c 'import ptyvisor; ...'` process, for the
  cost of an interpreter a script would pay once, and a fourth `python3 -c pass`, the
  interpreter's own share of it.
- throughput: MB/s of `head -c SIZE /dev/zero` through the session. Python: spawn() and
  read_nonblocking() until EOF; C++: `ptyvisor run` with its stdout read from a pipe. A
  sample counts only with exactly SIZE bytes relayed. Also the CPU time the client itself
  spent (this process; the `ptyvisor run` child), which the machine's load does not skew.

Contenders alternate within each round. Goals (issue 14): Python's throughput >= 0.8x the
C++ client's, its start <= 1.5x. Prints figures; never fails on timing.

    scripts/with-daemon.sh --build DIR --config-extra clients/python/with-daemon.toml -- \\
        env PYTHONPATH=clients/python/src python3 bench/client_python.py \\
        [--starts N] [--rounds N] [--mib N]

(with-daemon.toml lifts the admission rate: the default 120 sessions a minute is less than
the benchmark starts.)
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

import ptyvisor

PATH = "/usr/local/bin:/usr/bin:/bin"


def nearest_rank(values, pct):
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))]


def env():
    return dict(os.environ, PATH=PATH)


def python_start():
    t0 = time.perf_counter()
    child = ptyvisor.spawn("true", env=env())
    status = child.wait()
    child.close()
    elapsed = time.perf_counter() - t0
    if status != 0:
        raise RuntimeError(f"python: true exited {status}")
    return elapsed


def cli_start(cli):
    t0 = time.perf_counter()
    subprocess.run([cli, "run", "--", "true"], check=True, env=env(), stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def python_process_start(code=None):
    code = code or ("import ptyvisor,os; c = ptyvisor.spawn('true', env=dict(os.environ)); "
            "raise SystemExit(c.wait())")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env())
    return time.perf_counter() - t0


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def python_throughput(size):
    """(MB/s, CPU seconds this process spent relaying)."""
    child = ptyvisor.spawn(f"head -c {size} /dev/zero", env=env(), timeout=120)
    t0, cpu0 = time.perf_counter(), time.process_time()
    got = 0
    try:
        while True:
            got += len(child.read_nonblocking(1 << 20))
    except ptyvisor.EOF:
        pass
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    child.close()
    if got != size or child.exitstatus != 0:
        raise RuntimeError(f"python: relayed {got} of {size} bytes, exit {child.exitstatus}")
    return size / elapsed / 1e6, cpu


def cli_throughput(cli, size):
    """(MB/s, CPU seconds of the `ptyvisor run` process)."""
    t0, cpu0 = time.perf_counter(), children_cpu()
    proc = subprocess.Popen([cli, "run", "--", "head", "-c", str(size), "/dev/zero"],
                            env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    got = 0
    while chunk := proc.stdout.read1(1 << 20):
        got += len(chunk)
    status = proc.wait()
    elapsed, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if got != size or status != 0:
        raise RuntimeError(f"cli: relayed {got} of {size} bytes, exit {status}")
    return size / elapsed / 1e6, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=100, help="sessions per start contender")
    parser.add_argument("--rounds", type=int, default=5, help="throughput samples per contender")
    parser.add_argument("--mib", type=int, default=64, help="MiB per throughput sample")
    args = parser.parse_args()
    cli = os.environ.get("PTYVISOR_BIN")
    if not cli:
        sys.exit("client_python.py: PTYVISOR_BIN is not set (run it through scripts/with-daemon.sh)")

    for _ in range(3):   # warm both paths (page cache, the daemon's first sessions)
        python_start(), cli_start(cli)

    starts = {"python": [], "cli": [], "python-process": []}
    for i in range(args.starts):
        order = [("python", python_start), ("cli", lambda: cli_start(cli))]
        for name, run in order if i % 2 == 0 else reversed(order):
            starts[name].append(run())
    starts["python-bare"] = []
    for _ in range(max(5, args.starts // 10)):
        starts["python-process"].append(python_process_start())
        starts["python-bare"].append(python_process_start("pass"))

    size = args.mib << 20
    rates = {"python": [], "cli": []}
    for i in range(args.rounds):
        order = [("python", lambda: python_throughput(size)),
                 ("cli", lambda: cli_throughput(cli, size))]
        for name, run in order if i % 2 == 0 else reversed(order):
            rates[name].append(run())

    ms = {k: (1000 * nearest_rank(v, 50), 1000 * nearest_rank(v, 99), len(v))
          for k, v in starts.items()}
    print(f"start of `true` (ms)        {'p50':>8} {'p99':>8}   n")
    for name, label in (("cli", "C++ client (ptyvisor run)"), ("python", "Python client"),
                        ("python-process", "Python, a fresh process"),
                        ("python-bare", "python3 -c pass (baseline)")):
        p50, p99, n = ms[name]
        print(f"  {label:<26}{p50:8.2f} {p99:8.2f} {n:4d}")
    print(f"  ratio Python/C++          {ms['python'][0] / ms['cli'][0]:8.2f}x"
          f"{ms['python'][1] / ms['cli'][1]:8.2f}x   goal <= 1.5x")
    py = statistics.median(r for r, _ in rates["python"])
    cc = statistics.median(r for r, _ in rates["cli"])
    py_cpu = 1000 * statistics.median(c for _, c in rates["python"])
    cc_cpu = 1000 * statistics.median(c for _, c in rates["cli"])
    print(f"throughput, head -c {args.mib}M /dev/zero, median of {args.rounds}:"
          f"{'MB/s':>9} {'client CPU ms':>14}")
    print(f"  C++ client (ptyvisor run) {cc:24.1f} {cc_cpu:14.0f}")
    print(f"  Python client             {py:24.1f} {py_cpu:14.0f}")
    print(f"  ratio Python/C++          {py / cc:23.2f}x {py_cpu / max(cc_cpu, 1e-9):13.2f}x"
          "   goal >= 0.8x (MB/s)")
    print("(client CPU: what the client itself spent relaying; MB/s also depends on the daemon"
          " and the machine's load)")


if __name__ == "__main__":
    main()
