#!/usr/bin/env python3
"""Where a relay's CPU goes: N bytes of zeros through `ptyvisor run` and through `script`.

    bench/relay_cpu.py --build DIR [--baseline DIR] [--bytes N] [--rounds R]

DIR (and the baseline's) holds ptyvisord, ptyvisor and ptyvisor-screen, or is a build tree
(src/server/ptyvisord with ptyvisor-screen beside it, src/cli/ptyvisor). Each gets a private
daemon (direct backend, screen worker on) started here as a service would be (a process
session of its own). Round r runs every contender once, in an order rotated by r; each runs
`head -c N /dev/zero` as the test account, its stdout a fresh memfd (a file in memory, no
reader process whose cost would be counted): the memfd's size afterwards is the bytes the
contender relayed. A sample whose count is not N (zeros cross a terminal unchanged) is
discarded and fails its contender: none of its later samples is taken, and the run exits 1.
Nothing is retried.

It prints first the commit of the repository it is in (`git rev-parse --short HEAD`, with
"-dirty" when tracked files differ from it), and the start and end time (UTC) with the load
average at both: a 1-minute figure above half the CPUs says the run overlapped other work.

Per contender it prints medians over the rounds of:
  wall       the client process's wall time, and N / wall;
  busy       the whole machine's busy CPU (/proc/stat: all but idle and iowait), which takes in
             the tty's kworkers, that no process is charged for;
  daemon     ptyvisord's CPU (its own threads; not the sessions it reaped);
  worker     ptyvisor-screen's CPU, and its voluntary context switches (its wakeups);
  client     the client's CPU as reaped: the CLI alone (the daemon starts the command), or
             script with `head`, its child.
Needs root. A contender whose command fails stops the run.
"""
import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ACCOUNT = "ptyvisor-test"
TICK = os.sysconf("SC_CLK_TCK")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def commit():
    """The commit of this script's repository, short, "-dirty" when a tracked file differs
    (the figures are then of a tree no commit names); "unknown" outside a git checkout."""
    def git(*a):
        r = subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else None
    head = git("rev-parse", "--short", "HEAD")
    if head is None:
        return "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def moment():
    """(UTC time, the 1/5/15-minute load averages) now."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), os.getloadavg()


def load_text(load):
    return ", ".join(f"{x:.2f}" for x in load)


def as_account(argv):
    return ["setpriv", f"--reuid={ACCOUNT}", f"--regid={ACCOUNT}", "--init-groups"] + argv


def cpu_seconds(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    except OSError:
        return 0.0


def voluntary_switches(pid):
    try:
        return int(open(f"/proc/{pid}/status").read().split("voluntary_ctxt_switches:")[1].split()[0])
    except (OSError, IndexError):
        return 0


def children_named(parent, name):
    found = []
    for comm in glob.glob("/proc/[0-9]*/comm"):
        pid = int(comm.split("/")[2])
        try:
            if open(comm).read().strip() == name and int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) == parent:
                found.append(pid)
        except (OSError, ValueError):
            pass
    return found


def machine_busy():
    values = list(map(int, open("/proc/stat").readline().split()[1:]))
    return (sum(values) - values[3] - values[4]) / TICK


def binary(tree, name, subdir):
    """`name` in `tree`, or where a build tree has it (tree/src/subdir/name)."""
    for candidate in (os.path.join(tree, name), os.path.join(tree, "src", subdir, name)):
        if os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    sys.exit(f"relay_cpu: no {name} in {tree}")


def install(tree, work):
    """Copies of the three binaries in `work`/bin, a directory the test account can reach (a
    clone in /root is mode 0700); the daemon finds its screen worker beside itself."""
    bindir = os.path.join(work, "bin")
    os.mkdir(bindir)
    os.chmod(bindir, 0o755)
    for name, subdir in (("ptyvisord", "server"), ("ptyvisor-screen", "server"), ("ptyvisor", "cli")):
        shutil.copy2(binary(tree, name, subdir), os.path.join(bindir, name))
    return bindir


def start_daemon(bindir, work):
    socket_path = os.path.join(work, "d.sock")
    config = os.path.join(work, "d.toml")
    with open(config, "w") as f:
        f.write(f'user = "{ACCOUNT}"\nsocket = "{socket_path}"\nbackend = "direct"\n'
                f'state_directory = "{os.path.join(work, "state")}"\n')
    daemon = subprocess.Popen([os.path.join(bindir, "ptyvisord"), "--config", config],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while not (os.path.exists(socket_path) and children_named(daemon.pid, "ptyvisor-screen")):
        if daemon.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"relay_cpu: the daemon in {bindir} did not come up with its screen worker")
        time.sleep(0.05)
    return daemon, socket_path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", required=True)
    parser.add_argument("--baseline")
    parser.add_argument("--bytes", type=int, default=64 << 20)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("relay_cpu: needs root")
    work = tempfile.mkdtemp(prefix="ptyvisor-relay-cpu.")
    os.chmod(work, 0o755)
    command = f"head -c {args.bytes} /dev/zero"
    status = 0
    daemons, contenders = {}, {}
    cpus = os.cpu_count() or 1
    started, load0 = moment()
    print(f"commit {commit()}; start {started}, load average {load_text(load0)} ({cpus} CPUs)", flush=True)
    try:
        for name, bindir in (("ptyvisor (CLI)", args.build), ("ptyvisor (baseline CLI)", args.baseline)):
            if not bindir:
                continue
            sub = os.path.join(work, str(len(daemons)))
            os.mkdir(sub)
            os.chmod(sub, 0o755)
            installed = install(bindir, sub)
            daemons[name] = start_daemon(installed, sub)
            contenders[name] = as_account([os.path.join(installed, "ptyvisor"), "run", "--socket",
                                           daemons[name][1], "--quiet", "--", "sh", "-c", command])
        contenders["script"] = as_account(["script", "-q", "-c", command, "/dev/null"])
        names = list(contenders)
        samples = {name: [] for name in names}
        failed = {}  # contender -> why its sample was discarded
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                if name in failed:
                    continue
                daemon = daemons[name][0].pid if name in daemons else None
                workers = children_named(daemon, "ptyvisor-screen") if daemon else []
                # The sink: a memfd, whose size afterwards is what the contender wrote. Its
                # pages are allocated as written, the same cost for every contender.
                sink = os.memfd_create("relay-cpu-sink", os.MFD_CLOEXEC)
                try:
                    d0 = cpu_seconds(daemon) if daemon else 0.0
                    w0 = sum(cpu_seconds(w) for w in workers)
                    s0 = sum(voluntary_switches(w) for w in workers)
                    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    b0, t0 = machine_busy(), time.perf_counter()
                    subprocess.run(contenders[name], stdin=subprocess.DEVNULL, stdout=sink, cwd="/tmp", check=True)
                    wall, busy = time.perf_counter() - t0, machine_busy() - b0
                    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                    relayed = os.fstat(sink).st_size
                finally:
                    os.close(sink)
                if relayed != args.bytes:
                    failed[name] = f"round {r + 1}: {relayed} bytes relayed, {args.bytes} expected; sample discarded"
                    print(f"relay_cpu: FAIL {name}: {failed[name]}", file=sys.stderr, flush=True)
                    continue
                samples[name].append({
                    "wall": wall,
                    "busy": busy,
                    "daemon": (cpu_seconds(daemon) - d0) if daemon else 0.0,
                    "worker": sum(cpu_seconds(w) for w in workers) - w0,
                    "wakeups": sum(voluntary_switches(w) for w in workers) - s0,
                    "client": c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime,
                    "bytes": relayed,
                })
        ended, load1 = moment()
        print(f"{args.bytes} bytes of zeros into a memfd, every sample's count checked; "
              f"median of {args.rounds} rounds (seconds of CPU)")
        print(f"{'contender':26s} {'samples':>7s} {'wall s':>7s} {'MB/s':>7s} {'busy':>6s} {'daemon':>7s} {'worker':>7s} "
              f"{'wakeups':>8s} {'client':>7s}")
        for name in names:
            if not samples[name]:
                print(f"{name:26s} {0:7d}   (no sample counted)")
                continue
            med = {k: statistics.median(s[k] for s in samples[name]) for k in samples[name][0]}
            ours = name in daemons  # script has no daemon and no worker: a dash, not a zero
            cell = lambda k, fmt: format(med[k], fmt) if ours else "–".rjust(int(fmt.split(".")[0]))  # noqa: E731
            print(f"{name:26s} {len(samples[name]):7d} {med['wall']:7.3f} {args.bytes / med['wall'] / 1e6:7.1f} "
                  f"{med['busy']:6.2f} {cell('daemon', '7.2f')} {cell('worker', '7.2f')} {cell('wakeups', '8.0f')} "
                  f"{med['client']:7.2f}")
        print(f"start {started}, load average {load_text(load0)}; end {ended}, load average {load_text(load1)}")
        peak = max(load0[0], load1[0])
        if peak > 0.5 * cpus:
            print(f"overlapped other work (load {peak:.2f} on {cpus} CPUs)")
        for name, why in failed.items():
            print(f"FAILED {name}: {why}")
        if failed:
            status = 1
    finally:
        for daemon, _ in daemons.values():
            daemon.terminate()
            daemon.wait(timeout=10)
        subprocess.run(["rm", "-rf", work], check=False)
    return status


if __name__ == "__main__":
    sys.exit(main())
