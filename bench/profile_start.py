#!/usr/bin/env python3
"""What a sandbox profile costs at START (issue 29): `ptyvisor run -- true` as the agent, with
no profile and with the strictest profile, on the direct backend.

    bench/profile_start.py --build DIR [--runs N] [--account NAME]

DIR is a build tree (src/server/ptyvisord, src/cli/ptyvisor, src/screen/ptyvisor-screen). A
private ptyvisord (direct backend, a process session and cgroup of its own) is configured with
two profiles the agent may choose: "none" (no setting) and "strict" (every setting the direct
backend enforces: memory_max, tasks_max, cpu_quota, network none, a read-only file system with
the working directory writable, a hidden path). Each round runs one `ptyvisor run --profile
none -- true` and one `--profile strict` as the account (setpriv), in alternating order, and
times each whole process from fork to exit. Printed: p50 and p99 (nearest rank) of each, and
the ratio of the p50s, with the commit and the 1-minute load average before and after.
"""
import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nearest_rank(values, pct):
    s = sorted(values)
    return s[max(0, min(len(s) - 1, int(round(pct / 100 * len(s) + 0.5)) - 1))]


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build/default"))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--account", default="ptyvisor-test")
    args = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("must run as root (ptyvisord runs as root)")
    daemon_bin = os.path.join(args.build, "src/server/ptyvisord")
    cli = os.path.join(args.build, "src/cli/ptyvisor")
    import pwd
    account = pwd.getpwnam(args.account)
    tmp = tempfile.mkdtemp(prefix="ptyvisor-profile-bench-")
    os.chmod(tmp, 0o755)
    sock = os.path.join(tmp, "run/ptyvisor.sock")
    os.makedirs(os.path.dirname(sock), mode=0o755)
    work = os.path.join(tmp, "work")
    os.makedirs(work)
    os.chown(work, account.pw_uid, account.pw_gid)
    cfg = os.path.join(tmp, "ptyvisord.toml")
    with open(cfg, "w") as f:
        f.write(f'user = "{args.account}"\nsocket = "{sock}"\nbackend = "direct"\n'
                f'state_directory = "{tmp}/state"\nallowed_profiles = ["none", "strict"]\n'
                '[limits]\nadmissions_per_minute = 1000000\n'
                '[profiles.none]\n'
                '[profiles.strict]\nmemory_max = "512M"\ntasks_max = 64\ncpu_quota = "100%"\n'
                'network = "none"\nfilesystem = "read-only"\nwritable = ["cwd"]\nhidden = ["/root"]\n')
    notify_path = os.path.join(tmp, "notify")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.settimeout(15)
    log = open(os.path.join(tmp, "ptyvisord.log"), "w")
    daemon = subprocess.Popen([daemon_bin, "--config", cfg], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                              env=dict(os.environ, NOTIFY_SOCKET=notify_path), cwd=tmp, start_new_session=True)
    try:
        while "READY=1" not in notify.recv(4096).decode().split("\n"):
            pass
        as_agent = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", "--"]
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "TERM": "dumb"}

        def one(profile):
            t0 = time.perf_counter()
            p = subprocess.run(as_agent + [cli, "run", "--socket", sock, "--profile", profile, "-q", "--", "true"],
                               cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
            took = time.perf_counter() - t0
            if p.returncode != 0:
                raise SystemExit(f"--profile {profile}: exit {p.returncode}: {p.stderr.decode(errors='replace')}")
            return took

        times = {"none": [], "strict": []}
        load_before = loadavg()
        start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for _ in range(3):  # warm-up: page cache, the daemon's first sessions
            one("none"), one("strict")
        for i in range(args.runs):
            for profile in (("none", "strict") if i % 2 == 0 else ("strict", "none")):
                times[profile].append(one(profile))
        load_after = loadavg()
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(10)
        except subprocess.TimeoutExpired:
            daemon.kill()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    print(f"profile start cost, direct backend, {args.runs} runs each, commit {commit}{'-dirty' if dirty else ''}, "
          f"{start}; 1-minute load {load_before:.2f} before, {load_after:.2f} after")
    for profile, t in times.items():
        print(f"  --profile {profile:6}  p50 {statistics.median(t) * 1e3:7.2f} ms  p99 {nearest_rank(t, 99) * 1e3:7.2f} ms")
    print(f"  ratio strict/none (p50): {statistics.median(times['strict']) / statistics.median(times['none']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
