#!/usr/bin/env python3
"""ptyvisor benchmark suite (docs/performance.md). Run it through bench/run.sh.

Every benchmark runs its contenders side by side, interleaved (round r runs them in an order
rotated by r), repeats, and reports medians and ratios against the physical limit (a
forkpty() reader in bench/termbench). Throughput samples count only with the exact byte
count the terminal must relay, and nothing is retried: a failed sample fails its contender.
"ptyvisor-raw" is termbench's raw protocol client; "ptyvisor (CLI)" is `ptyvisor run`. Results: DIR/results.json, DIR/results.csv,
DIR/results.md and DIR/performance.png.

The persistent-session benchmarks (idle-sessions, replay, observers) use bench/sessionbench,
a raw protocol client of version 2, and measure against the goals of docs/performance.md,
"Persistent sessions": they have no forkpty contender.

Everything is bounded in time, and every process started here is stopped by PID on exit.
"""
import argparse
import csv
import json
import os
import platform
import pwd
import resource
import select
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACCOUNT = "ptyvisor-test"
# In run order: memory first, so that its idle numbers are those of a fresh daemon whose heap
# no earlier transfer has grown.
# The persistent-session benchmarks come next: idle-sessions measures deltas of the daemon's
# memory and wants it quiet, with no session retained from an earlier benchmark.
ALL = ["memory", "idle-sessions", "replay", "observers", "throughput", "latency", "fairness", "start", "scale", "cpu",
       "syscalls", "micro"]
REQUIRED = {"forkpty", "script", "ptyvisor", "ptyvisor-raw", "ptyvisor (CLI)"}  # contenders that must always work
PERSISTENT = {"idle-sessions", "replay", "observers"}  # benchmarks whose every failure fails the run
# The goals of persistent sessions (docs/performance.md, "Persistent sessions").
GOAL_REPLAY_MS = 20.0
GOAL_OBSERVER_RATIO = 0.9
GOAL_IDLE_KIB = 16.0
GOAL_LIST_MS = 20.0
OBSERVERS = 8
FLOODS = 15  # fairness: sessions flooding output while a person types in one more
TYPED = "stty raw -echo; echo READY; exec cat"  # the 16th session, typed into
TEXT_LINE = "some text line"


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class Failure(Exception):
    pass


class Suite:
    def __init__(self, args):
        self.args = args
        self.smoke = args.smoke
        self.out = os.path.abspath(args.out)
        self.build = os.path.abspath(args.build)
        self.tmp = tempfile.mkdtemp(prefix="ptyvisor-bench-")
        os.chmod(self.tmp, 0o755)
        built = {
            "ptyvisord": os.path.join(self.build, "src/server/ptyvisord"),
            "ptyvisor": os.path.join(self.build, "src/cli/ptyvisor"),
            "termbench": os.path.join(self.build, "bench/termbench"),
            "micro": os.path.join(self.build, "bench/micro_protocol"),
            "sessionbench": os.path.join(self.build, "bench/sessionbench"),
            "screen": os.path.join(self.build, "src/server/ptyvisor-screen"),
        }
        # The account runs some of these, and a clone in /root (mode 0700) is out of its reach:
        # the suite runs copies from its own 0755 directory (ptyvisor-screen beside ptyvisord,
        # where the daemon looks for it).
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, mode=0o755)
        os.chmod(bindir, 0o755)
        self.bin = {}
        for key, path in built.items():
            copy = os.path.join(bindir, os.path.basename(path))
            if os.path.exists(path):
                shutil.copy2(path, copy)
                os.chmod(copy, 0o755)
            self.bin[key] = copy
        pw = pwd.getpwnam(ACCOUNT)
        self.uid, self.gid, self.home = pw.pw_uid, pw.pw_gid, pw.pw_dir
        self.procs = []  # (Popen, how to stop it) of long-running helpers
        self.daemon = None
        self.socket = os.path.join(self.tmp, "ptyvisor.sock")
        self.results = {}  # bench -> dict
        self.rows = []  # flat rows for CSV
        self.failures = []  # (bench, contender, reason)
        self.skips = []  # (bench, contender, reason)
        self.harness = None
        self.sd_daemon = None  # ptyvisord --backend systemd in the harness (full runs only)
        self.sd_socket = None
        self.ssh = None
        self.ssh_pid = None
        self.cgroup = None
        self.extra_cgroups = []  # of the fresh daemon that idle-sessions starts
        # --baseline DIR: ptyvisord and ptyvisor of another commit, measured side by side with
        # this build's as the contender "ptyvisor (baseline)" (fairness), on a daemon of its own.
        self.baseline = None
        if args.baseline:
            self.baseline = {"ptyvisord": os.path.join(os.path.abspath(args.baseline), "ptyvisord"),
                             "ptyvisor": os.path.join(os.path.abspath(args.baseline), "ptyvisor")}
        self.baseline_socket = os.path.join(self.tmp, "ptyvisor-baseline.sock")

    # ---- processes -------------------------------------------------------------------------

    def account_env(self):
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": self.home, "TERM": "xterm",
                "LANG": "C", "USER": ACCOUNT, "LOGNAME": ACCOUNT, "SHELL": "/bin/sh"}

    def as_account(self, argv):
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--"] + argv

    def run(self, argv, timeout, account=False, check=True, stdout=subprocess.PIPE, env=None, input=None):
        """Runs argv to completion (bounded); returns (seconds, CompletedProcess). `input`
        (bytes) is its stdin, else /dev/null."""
        if account:
            argv = self.as_account(argv)
            env = env or self.account_env()
        t0 = time.perf_counter()
        stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        try:
            p = subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE,
                               timeout=timeout, cwd=self.tmp, env=env, start_new_session=True, **stdin)
        except subprocess.TimeoutExpired as e:
            raise Failure(f"timed out after {timeout}s: {' '.join(argv)}") from e
        secs = time.perf_counter() - t0
        if check and p.returncode != 0:
            err = (p.stderr or b"").decode(errors="replace").strip()[-400:]
            raise Failure(f"exit {p.returncode}: {' '.join(argv[-6:])}: {err}")
        return secs, p

    def run_counted(self, argv, timeout, account=False, env=None):
        """Runs argv to completion (bounded) with its stdout on a pipe that this process drains
        and counts; returns (seconds, bytes read from its stdout). The count is what lets the
        throughput benchmark reject a run that relayed less (or more) than the command wrote."""
        if account:
            argv = self.as_account(argv)
            env = env or self.account_env()
        err = tempfile.TemporaryFile()
        t0 = time.perf_counter()
        deadline = t0 + timeout
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                             cwd=self.tmp, env=env, start_new_session=True)
        count = 0
        try:
            fd = p.stdout.fileno()
            while True:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise subprocess.TimeoutExpired(argv, timeout)
                if not select.select([fd], [], [], left)[0]:
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                count += len(chunk)
            p.wait(timeout=max(0.1, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired as e:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise Failure(f"timed out after {timeout}s: {' '.join(argv)}") from e
        finally:
            p.stdout.close()
        secs = time.perf_counter() - t0
        if p.returncode != 0:
            err.seek(0)
            raise Failure(f"exit {p.returncode}: {' '.join(argv[-6:])}: {err.read().decode(errors='replace').strip()[-400:]}")
        return secs, count

    def termbench(self, mode, via, cmd, timeout=120, sock=None, **opts):
        argv = [self.bin["termbench"], mode, "--via", via, "--timeout", str(timeout)]
        if via == "ptyvisor":
            argv += ["--socket", sock or self.socket]
        for k, v in opts.items():
            argv += [f"--{k}", str(v)]
        argv += ["--"] + cmd
        _, p = self.run(argv, timeout + 10, account=(via == "ptyvisor"))
        return json.loads(p.stdout.decode().strip().splitlines()[-1])

    def sessionbench(self, mode, args, timeout=120, input=None, sock=None):
        """bench/sessionbench MODE as the account; returns (its JSON, the command as a person
        would type it, with the socket as $SOCKET)."""
        tail = ["--timeout", str(timeout)] + [str(a) for a in args]
        argv = [self.bin["sessionbench"], mode, "--socket", sock or self.socket] + tail
        shown = " ".join([os.path.relpath(self.bin["sessionbench"], ROOT), mode, "--socket", "$SOCKET"] +
                         [shlex.quote(a) for a in tail])
        _, p = self.run(argv, timeout + 10, account=True, input=input)
        return json.loads(p.stdout.decode().strip().splitlines()[-1]), shown

    def stop_all(self):
        for p, how in reversed(self.procs):
            if p.poll() is None:
                try:
                    how(p)
                    p.wait(timeout=10)
                except Exception:  # noqa: BLE001 - last resort below
                    p.kill()
                    p.wait()
        self.procs.clear()
        if self.ssh_pid:
            try:
                os.kill(self.ssh_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        self.remove_cgroup()
        for cg in self.extra_cgroups:
            self.remove_cgroup(cg)
        if self.harness:
            subprocess.run([os.path.join(ROOT, "tests/harness/down.sh"), self.harness["dir"]],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- the daemon ------------------------------------------------------------------------

    def start_daemon(self):
        self.daemon, self.cgroup = self.launch_daemon("", self.socket)

    def launch_daemon(self, tag, sock, binary=None):
        """A private ptyvisord (direct backend) on `sock`, in a cgroup of its own; returns
        (Popen, cgroup path or None) once it has sent READY=1. `tag` keeps the files of a
        second daemon apart from the first's."""
        cfg = os.path.join(self.tmp, f"ptyvisord{tag}.toml")
        with open(cfg, "w") as f:
            f.write(f'user = "{ACCOUNT}"\nsocket = "{sock}"\nbackend = "direct"\n'
                    f'state_directory = "{self.tmp}/state{tag}"\n[limits]\nadmissions_per_minute = 1000000\n'
                    'max_sessions = 2000\nmax_unauthenticated = 2000\n')
        notify_path = os.path.join(self.tmp, f"notify{tag}")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(15)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path)
        daemon_log = open(os.path.join(self.out, f"ptyvisord{tag}.log"), "w")
        # The direct backend keeps its sessions in <its own cgroup>/ptyvisor.sessions and, at
        # start-up, kills every cgroup it finds there. Any other ptyvisord started from the same
        # cgroup (a test suite on this machine) would kill our sessions: give ours a cgroup of
        # its own.
        cgroup = self.private_cgroup(tag)
        procs = os.path.join(cgroup, "cgroup.procs") if cgroup else None
        # The daemon as shipped keeps every session's screen in ptyvisor-screen, which it looks
        # for beside itself; without it the daemon runs screenless and would look cheaper than
        # it is. A baseline older than the screen has none, and says so in the log.
        worker = os.path.join(os.path.dirname(binary or self.bin["ptyvisord"]), "ptyvisor-screen")
        if not os.access(worker, os.X_OK):
            if not tag:
                raise Failure(f"{worker} is missing: the daemon would run without its screen worker")
            log(f"ptyvisord{tag}: no ptyvisor-screen beside it; it runs without a screen worker")

        def enter_cgroup():
            if procs:
                with open(procs, "w") as f:
                    f.write("0")
        # A session of its own, as systemd gives every service: the daemon is then not in this
        # script's scheduler autogroup, and what it does to its own priority is its alone.
        p = subprocess.Popen([binary or self.bin["ptyvisord"], "--config", cfg], stdin=subprocess.DEVNULL,
                             stdout=daemon_log, stderr=daemon_log, env=env, cwd=self.tmp,
                             preexec_fn=enter_cgroup, start_new_session=True)
        self.procs.append((p, lambda q: q.send_signal(signal.SIGTERM)))
        try:
            while True:
                msg = notify.recv(4096).decode()
                if "READY=1" in msg.split("\n"):
                    break
        except socket.timeout as e:
            raise Failure("ptyvisord did not send READY=1 within 15 s") from e
        finally:
            notify.close()
        log(f"ptyvisord{tag} ready, pid {p.pid}")
        return p, cgroup

    def private_cgroup(self, tag=""):
        for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            if os.path.exists(os.path.join(mount, "cgroup.procs")) and \
                    subprocess.run(["stat", "-fc", "%T", mount], capture_output=True, text=True).stdout.strip() == "cgroup2fs":
                break
        else:
            log("no cgroup2 hierarchy: ptyvisord shares its session cgroup root")
            return None
        with open("/proc/self/cgroup") as f:
            own = next((line.strip()[3:] for line in f if line.startswith("0::")), "/")
        path = os.path.join(mount + own, f"ptyvisor-bench-{os.getpid()}{tag}")
        try:
            os.mkdir(path)
        except OSError as e:
            log(f"cannot create {path} ({e}): ptyvisord shares its session cgroup root")
            return None
        return path

    def remove_cgroup(self, cgroup=None):
        cgroup = cgroup or self.cgroup
        if not cgroup:
            return
        for _ in range(50):
            try:
                sessions = os.path.join(cgroup, "ptyvisor.sessions")
                if os.path.isdir(sessions):
                    for child in os.listdir(sessions):
                        if os.path.isdir(os.path.join(sessions, child)):
                            os.rmdir(os.path.join(sessions, child))
                    os.rmdir(sessions)
                os.rmdir(cgroup)
                return
            except OSError:
                time.sleep(0.1)
        log(f"could not remove {cgroup}")

    def proc_stat(self):
        """(cpu seconds, voluntary+involuntary context switches, schedstat runs, rss KiB, fds)."""
        pid = self.daemon.pid
        tick = os.sysconf("SC_CLK_TCK")
        cpu = switches = runs = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / tick
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                runs += int(f.read().split()[2])
        rss = pss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return {"cpu": cpu, "switches": switches, "runs": runs, "rss_kib": rss, "pss_kib": pss, "fds": fds}

    def wait_daemon_quiet(self, fds, timeout=60):
        """Waits until the daemon's descriptor count is back to `fds` (sessions cleaned up)."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc_stat()["fds"] <= fds:
                return
            time.sleep(0.1)
        raise Failure(f"ptyvisord still holds {self.proc_stat()['fds']} descriptors (baseline {fds})")

    # ---- optional contenders ----------------------------------------------------------------

    def setup_ssh(self):
        if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
            if self.smoke:
                return "openssh-server is not installed (--smoke installs nothing)"
            log("installing openssh-server")
            r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "openssh-server"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300,
                               env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            if r.returncode != 0:
                return "apt-get install openssh-server failed: " + r.stderr.decode()[-200:]
        d = os.path.join(self.tmp, "ssh")
        os.makedirs(d)
        os.chmod(d, 0o755)
        for k in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(d, k)],
                           check=True, timeout=30)
        os.chown(os.path.join(d, "user_key"), self.uid, self.gid)
        shutil.copy(os.path.join(d, "user_key.pub"), os.path.join(d, "authorized_keys"))
        os.chmod(os.path.join(d, "authorized_keys"), 0o644)
        os.makedirs("/run/sshd", exist_ok=True)
        with socket.socket() as s:  # a free loopback port
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with open(os.path.join(d, "sshd_config"), "w") as f:
            f.write(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n"
                    f"AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM yes\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                    f"PidFile {d}/sshd.pid\nAllowUsers {ACCOUNT}\nPrintMotd no\nPrintLastLog no\nUseDNS no\n")
        r = subprocess.run(["/usr/sbin/sshd", "-f", f"{d}/sshd_config", "-E", f"{d}/sshd.log"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)
        if r.returncode != 0:
            return "sshd did not start: " + r.stderr.decode()[-200:]
        # The daemonised sshd writes its PID file after its parent has exited: wait until the
        # whole line is there (an empty or partial file was seen in CI).
        pid_text = ""
        deadline = time.monotonic() + 10
        while not pid_text.endswith("\n") and time.monotonic() < deadline:
            try:
                with open(f"{d}/sshd.pid") as f:
                    pid_text = f.read()
            except FileNotFoundError:
                pass
            if not pid_text.endswith("\n"):
                time.sleep(0.05)
        if not pid_text.strip().isdigit():
            subprocess.run(["pkill", "-f", f"{d}/sshd_config"], timeout=10)  # not left running
            return f"sshd wrote no PID file within 10 s ({pid_text!r})"
        self.ssh_pid = int(pid_text)
        self.ssh = {"port": port, "key": f"{d}/user_key"}
        try:
            self.run(self.ssh_cmd("true"), 30, account=True)
        except Failure as e:
            self.ssh = None
            return f"ssh to 127.0.0.1:{port} failed: {e}"
        return None

    def ssh_cmd(self, cmd):
        return ["ssh", "-tt", "-F", "/dev/null", "-i", self.ssh["key"], "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
                "-p", str(self.ssh["port"]), f"{ACCOUNT}@127.0.0.1", cmd]

    def setup_harness(self):
        up = os.path.join(ROOT, "tests/harness/up.sh")
        if not os.path.exists(up):
            return "tests/harness/up.sh does not exist (systemd-run --pty needs a private systemd)"
        d = os.path.join(self.tmp, "harness")
        r = subprocess.run([up, d], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        self.harness = {"dir": d}
        if r.returncode != 0:
            return "tests/harness/up.sh failed: " + r.stderr.decode()[-300:]
        env = dict(os.environ)
        with open(os.path.join(d, "env")) as f:
            for line in f:
                line = line.strip()
                if "=" in line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    env[k] = v.strip('"')
        self.harness["env"] = env
        self.harness["exec"] = env["HARNESS_EXEC"].split()
        try:
            self.run(self.systemd_run_cmd("true"), 30, env=env)
        except Failure as e:
            return f"systemd-run --pty in the harness failed: {e}"
        return None

    def start_systemd_daemon(self):
        """A second ptyvisord, systemd backend, inside the harness (full runs only). Its PIDs
        and cgroups are the harness' own, so it and its clients run through HARNESS_EXEC."""
        self.sd_socket = os.path.join(self.tmp, "ptyvisor-systemd.sock")
        cfg = os.path.join(self.tmp, "ptyvisord-systemd.toml")
        with open(cfg, "w") as f:
            f.write(f'user = "{ACCOUNT}"\nsocket = "{self.sd_socket}"\nbackend = "systemd"\n'
                    f'state_directory = "{self.tmp}/state-systemd"\n[limits]\nadmissions_per_minute = 1000000\n'
                    'max_sessions = 2000\nmax_unauthenticated = 2000\n')
        notify_path = os.path.join(self.tmp, "notify-systemd")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(15)
        env = dict(self.harness["env"], NOTIFY_SOCKET=notify_path)
        logf = open(os.path.join(self.out, "ptyvisord-systemd.log"), "w")
        p = subprocess.Popen(self.harness["exec"] + [self.bin["ptyvisord"], "--config", cfg, "--backend", "systemd"],
                             stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env, cwd=self.tmp,
                             start_new_session=True)

        def stop(q):  # q is nsenter; it forked the daemon into the harness' pid namespace
            try:
                with open(f"/proc/{q.pid}/task/{q.pid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                kids = []
            for k in kids or [q.pid]:
                os.kill(k, signal.SIGTERM)
        self.procs.append((p, stop))
        try:
            while True:
                msg = notify.recv(4096).decode()
                if "READY=1" in msg.split("\n"):
                    break
        except socket.timeout:
            logf.flush()
            with open(logf.name) as f:
                return "ptyvisord --backend systemd did not send READY=1 within 15 s: " + f.read()[-300:]
        finally:
            notify.close()
        self.sd_daemon = p
        log(f"ptyvisord (systemd backend) ready in the harness, nsenter pid {p.pid}")
        return None

    def termbench_systemd(self, cmd, count):
        """termbench start against the systemd-backend daemon, as the account, in the harness."""
        argv = self.harness["exec"] + self.as_account(
            [self.bin["termbench"], "start", "--via", "ptyvisor", "--socket", self.sd_socket, "--timeout", "120",
             "--count", str(count), "--warmup", "3", "--"] + cmd)
        _, p = self.run(argv, 130, env=self.account_env())
        return json.loads(p.stdout.decode().strip().splitlines()[-1])

    def systemd_run_cmd(self, cmd):
        return self.harness["exec"] + ["systemd-run", "--pty", "--quiet", "-p", f"User={ACCOUNT}",
                                       "/bin/sh", "-c", cmd]

    # ---- recording ---------------------------------------------------------------------------

    def row(self, bench, case, contender, metric, value, unit, ratio=None):
        self.rows.append({"bench": bench, "case": case, "contender": contender, "metric": metric,
                          "value": value, "unit": unit, "ratio_vs_forkpty": ratio})

    def fail(self, bench, contender, reason):
        log(f"FAIL {bench}/{contender}: {reason}")
        self.failures.append({"bench": bench, "contender": contender, "reason": str(reason)})

    def skip(self, bench, contender, reason):
        log(f"skip {bench}/{contender}: {reason}")
        self.skips.append({"bench": bench, "contender": contender, "reason": str(reason)})

    def rounds(self):
        return self.args.rounds or (1 if self.smoke else 5)

    # ---- benchmarks --------------------------------------------------------------------------

    def bench_throughput(self):
        n = self.args.bytes or (4 << 20 if self.smoke else 128 << 20)
        # yes's stderr goes nowhere: where SIGPIPE is ignored (systemd services by default),
        # yes reports the closed pipe, and that line would cross the relay uncounted in N.
        streams = {"zero": f"head -c {n} /dev/zero", "text": f"yes '{TEXT_LINE}' 2>/dev/null | head -c {n}"}
        # Every contender returns (seconds, bytes that reached its reader): termbench counts
        # what it read from the PTY or the OUTPUT frames; the whole-process contenders write
        # to a pipe that run_counted() drains and counts.
        def tb(via):
            def measure(c):
                j = self.termbench("throughput", via, ["sh", "-c", c])
                return j["seconds"], j["bytes"]
            return measure
        contenders = {
            "forkpty": tb("pty"),
            "ptyvisor-raw": tb("ptyvisor"),
            "ptyvisor (CLI)": lambda c: self.run_counted([self.bin["ptyvisor"], "run", "--socket", self.socket, "--quiet",
                                                    "--", "sh", "-c", c], 300, account=True),
            "script": lambda c: self.run_counted(["script", "-q", "-c", c, "/dev/null"], 300, account=True),
        }
        if self.baseline:
            try:
                self.start_baseline_daemon()
                contenders["ptyvisor (baseline CLI)"] = lambda c: self.run_counted(
                    [self.baseline["ptyvisor"], "run", "--socket", self.baseline_socket, "--quiet", "--", "sh", "-c", c],
                    300, account=True)
            except Failure as e:
                self.fail("throughput", "ptyvisor (baseline CLI)", str(e))
        if self.ssh:
            contenders["ssh"] = lambda c: self.run_counted(self.ssh_cmd(c), 300, account=True)
        if self.harness and "exec" in self.harness:
            contenders["systemd-run"] = lambda c: self.run_counted(self.systemd_run_cmd(c), 300, env=self.harness["env"])
        self.skip("throughput", "tmux", "not a relay: tmux renders into its own screen and redraws it for an "
                  "attached client, so bytes/s through it is not comparable")
        out = {"bytes": n, "streams": {}, "relayed_bytes": {}}
        for sname, cmd in streams.items():
            want = self.relayed_bytes(sname, n)
            out["relayed_bytes"][sname] = want
            samples = {c: [] for c in contenders}
            names = list(contenders)
            for r in range(self.rounds()):
                for c in names[r % len(names):] + names[:r % len(names)]:
                    if c in self.failed_contenders("throughput"):
                        continue
                    # No retry: a failed sample, or one whose byte count is wrong, fails the
                    # contender for this benchmark (listed under Failures) and is never counted.
                    try:
                        secs, got = contenders[c](cmd)
                    except (Failure, ValueError, KeyError) as e:
                        self.fail("throughput", c, f"{sname}: {e}")
                        continue
                    if got != want:
                        self.fail("throughput", c, f"{sname}: {got} bytes arrived, {want} expected; sample discarded")
                        continue
                    samples[c].append(n / secs / 1e6)
            med = {c: statistics.median(v) for c, v in samples.items() if v}
            base = med.get("forkpty")
            out["streams"][sname] = {c: {"median_mbps": m, "samples": samples[c],
                                         "ratio_vs_forkpty": (m / base if base else None)} for c, m in med.items()}
            for c, m in med.items():
                self.row("throughput", sname, c, "MB/s", round(m, 2), "MB/s", round(m / base, 3) if base else None)
            log(f"throughput {sname}: " + ", ".join(f"{c} {m:.1f} MB/s" for c, m in med.items()))
        self.results["throughput"] = out

    @staticmethod
    def relayed_bytes(stream, n):
        """The bytes that must reach the reader when the command writes n: the terminal's ONLCR
        turns each newline of the text stream into CR LF; zeros cross unchanged."""
        return n + n // (len(TEXT_LINE) + 1) if stream == "text" else n

    def failed_contenders(self, bench):
        return {f["contender"] for f in self.failures if f["bench"] == bench}

    def bench_latency(self):
        count = 50 if self.smoke else 400
        cases = {
            "cat-raw": (["sh", "-c", "stty raw -echo; echo READY; exec cat"], "READY", "raw"),
            "sh": (["env", "PS1=$ ", "sh", "-i"], "$ ", "line"),
        }
        out = {}
        for case, (cmd, ready, echo) in cases.items():
            # Only the raw protocol client: the CLI relays keystrokes from a terminal, so timing
            # it would need a second PTY in front of it, whose relay would be counted too.
            samples = {"forkpty": [], "ptyvisor-raw": []}
            for r in range(self.rounds()):
                order = ["forkpty", "ptyvisor-raw"] if r % 2 == 0 else ["ptyvisor-raw", "forkpty"]
                for c in order:
                    via = "pty" if c == "forkpty" else "ptyvisor"
                    try:
                        j = self.termbench("latency", via, cmd, timeout=60, count=count, warmup=20,
                                           ready=ready, echo=echo)
                        samples[c].append(j["us"])
                    except (Failure, ValueError, KeyError) as e:
                        self.fail("latency", c, f"{case}: {e}")
            res = {}
            for c, runs in samples.items():
                if not runs:
                    continue
                res[c] = {k: statistics.median(run[k] for run in runs) for k in ("p50", "p90", "p99", "mean")}
            # A difference of two percentiles (each the median over runs), not a percentile of
            # the latency ptyvisor adds to one keystroke: named for what it is.
            if "forkpty" in res and "ptyvisor-raw" in res:
                res["difference"] = {f"{k} difference": res["ptyvisor-raw"][k] - res["forkpty"][k] for k in ("p50", "p99")}
            for c, v in res.items():
                for k in v:
                    if k.startswith(("p50", "p99")):
                        self.row("latency", case, c, k, round(v[k], 1), "us")
            out[case] = res
            log(f"latency {case}: " + json.dumps({c: {k: round(x, 1) for k, x in v.items() if k.startswith(("p50", "p99"))}
                                                  for c, v in res.items()}))
        self.results["latency"] = out

    # ---- fairness: one typed session among floods ------------------------------------------

    def bench_fairness(self):
        """Echo latency of a 16th session while FLOODS sessions flood output, per relay: every
        contender relays all 16 terminals its own way (ptyvisor: one daemon for all, the CLI
        per session; script and ssh: one relay per session; tmux: one server for all). The
        floods are `termbench flood`, which counts what its terminal accepted while the
        keystrokes were timed, so a relay that starves the floods shows in their throughput."""
        count, warmup = (20, 5) if self.smoke else (100, 10)
        floods = 2 if self.smoke else FLOODS
        rounds = self.args.rounds or (1 if self.smoke else 3)
        contenders = {"ptyvisor (CLI)": self.fairness_ptyvisor(self.bin["ptyvisor"], self.socket),
                      "script": self.fairness_script()}
        if self.baseline:
            try:
                self.start_baseline_daemon()
                contenders["ptyvisor (baseline CLI)"] = self.fairness_ptyvisor(self.baseline["ptyvisor"], self.baseline_socket)
            except Failure as e:
                self.fail("fairness", "ptyvisor (baseline CLI)", str(e))
        if shutil.which("tmux"):
            contenders["tmux"] = self.fairness_tmux()
        else:
            self.skip("fairness", "tmux", "tmux is not installed")
        if self.ssh:
            contenders["ssh"] = self.fairness_ssh()
        else:
            self.skip("fairness", "ssh", "no sshd (see the throughput benchmark's skip)")
        samples = {c: [] for c in contenders}
        names = list(contenders)
        for r in range(rounds):
            for c in names[r % len(names):] + names[:r % len(names)]:
                if c in self.failed_contenders("fairness"):
                    continue
                try:
                    samples[c].append(self.fairness_round(c, contenders[c], floods, count, warmup))
                except (Failure, ValueError, KeyError, OSError) as e:
                    self.fail("fairness", c, str(e))
        res = {}
        for c, runs in samples.items():
            if not runs:
                continue
            res[c] = {"p50_ms": statistics.median(x["us"]["p50"] for x in runs) / 1000,
                      "p99_ms": statistics.median(x["us"]["p99"] for x in runs) / 1000,
                      "flood_mbps": statistics.median(x["flood_mbps"] for x in runs),
                      "runs": runs}
            for k in ("p50_ms", "p99_ms", "flood_mbps"):
                self.row("fairness", f"{floods} floods + 1 typed", c, k, round(res[c][k], 2),
                         "MB/s" if k == "flood_mbps" else "ms")
        self.results["fairness"] = {"floods": floods, "count": count, "warmup": warmup, "rounds": rounds,
                                    "contenders": res}
        log("fairness: " + ", ".join(f"{c} p50 {v['p50_ms']:.1f} ms p99 {v['p99_ms']:.1f} ms floods {v['flood_mbps']:.1f} MB/s"
                                     for c, v in res.items()))

    def start_baseline_daemon(self):
        """The --baseline daemon, once, configured as this build's."""
        if self.baseline.get("daemon"):
            return
        p, cg = self.launch_daemon("-baseline", self.baseline_socket, self.baseline["ptyvisord"])
        self.baseline["daemon"] = p
        if cg:
            self.extra_cgroups.append(cg)

    def fairness_round(self, name, contender, floods, count, warmup):
        """One round of one contender: starts the floods, times `count` keystrokes in the typed
        session, then reads what the floods wrote meanwhile. Returns termbench's latency JSON
        plus the floods' total MB/s."""
        start_flood, typed_argv, teardown = contender
        d = tempfile.mkdtemp(prefix="fair-", dir=self.tmp)
        os.chown(d, self.uid, self.gid)
        reports = [os.path.join(d, f"flood{i}") for i in range(floods)]
        started = []
        pids = []
        try:
            # One at a time: sshd drops unauthenticated connections past MaxStartups (10).
            for rep in reports:
                started.append(start_flood(rep))
                pids.append(self.wait_flood_pid(rep, started[-1]))
            for pid in pids:
                os.kill(pid, signal.SIGUSR1)  # the window opens
            argv = [self.bin["termbench"], "latency", "--via", "pty", "--echo", "any", "--ready", "READY",
                    "--count", str(count), "--warmup", str(warmup), "--timeout", "60", "--"] + typed_argv
            try:
                _, p = self.run(argv, 20 + count * 5, account=True)
            finally:
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGTERM)  # the window closes
                    except ProcessLookupError:
                        pass
            j = json.loads(p.stdout.decode().strip().splitlines()[-1])
            mbps = 0.0
            for rep in reports:
                deadline = time.monotonic() + 15
                while not os.path.exists(rep):
                    if time.monotonic() > deadline:
                        raise Failure(f"{name}: flood {rep} wrote no report")
                    time.sleep(0.02)
                with open(rep) as f:
                    fr = json.load(f)
                if fr["seconds"] <= 0:
                    raise Failure(f"{name}: a flood never saw the window open: {fr}")
                mbps += fr["bytes"] / fr["seconds"] / 1e6
            j["flood_mbps"] = mbps
            return j
        finally:
            teardown(started)
            shutil.rmtree(d, ignore_errors=True)

    def wait_flood_pid(self, report, proc):
        deadline = time.monotonic() + 30
        while True:
            try:
                with open(report + ".pid") as f:
                    return int(f.read())
            except (FileNotFoundError, ValueError):
                pass
            if proc is not None and proc.poll() is not None:
                raise Failure(f"the flood's relay exited with {proc.returncode} before it ran")
            if time.monotonic() > deadline:
                raise Failure(f"the flood {report} did not start within 30 s")
            time.sleep(0.02)

    def spawn_account(self, argv):
        """A relay process as the account, in a session of its own (so in a scheduler autogroup
        of its own, like a process started from a terminal), output thrown away."""
        return subprocess.Popen(self.as_account(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=self.tmp, env=self.account_env(), start_new_session=True)

    def stop_relays(self, procs):
        for p in procs:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            if p is None:
                continue
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def flood_cmd(self, report):
        return [self.bin["termbench"], "flood", "--report", report]

    def fairness_ptyvisor(self, cli, sock):
        run = [cli, "run", "--socket", sock, "--quiet", "--"]
        return (lambda rep: self.spawn_account(run + self.flood_cmd(rep)), run + ["sh", "-c", TYPED], self.stop_relays)

    def fairness_script(self):
        return (lambda rep: self.spawn_account(["script", "-q", "-c", shlex.join(self.flood_cmd(rep)), "/dev/null"]),
                ["script", "-q", "-c", TYPED, "/dev/null"], self.stop_relays)

    def fairness_ssh(self):
        return (lambda rep: self.spawn_account(self.ssh_cmd(shlex.join(self.flood_cmd(rep)))),
                self.ssh_cmd(TYPED), self.stop_relays)

    def fairness_tmux(self):
        """One tmux server for all: the typed pane is window 0, on screen; each flood is a
        window of its own, off screen (tmux still parses all it writes)."""
        d = os.path.join(self.tmp, "tmux")  # the account's tmux server makes its socket here
        os.makedirs(d, exist_ok=True)
        os.chown(d, self.uid, self.gid)
        sock = os.path.join(d, "fair.sock")
        tmux = ["tmux", "-S", sock, "-f", "/dev/null"]

        def start(rep):
            if not os.path.exists(sock):
                self.run(tmux + ["new-session", "-d", "-s", "fair", "-x", "80", "-y", "24", TYPED], 30, account=True)
                self.run(tmux + ["set-option", "-g", "status", "off"], 30, account=True)
            self.run(tmux + ["new-window", "-d", "-t", "fair", shlex.join(self.flood_cmd(rep))], 30, account=True)
            return None

        def teardown(_):
            if os.path.exists(sock):
                self.run(tmux + ["kill-server"], 30, account=True, check=False)
                try:
                    os.unlink(sock)
                except FileNotFoundError:
                    pass
        return (start, tmux + ["attach-session", "-t", "fair:0"], teardown)

    def bench_start(self):
        count = 20 if self.smoke else 200
        out = {}
        if not self.smoke and self.harness and "exec" in self.harness and not self.sd_daemon:
            why = self.start_systemd_daemon()
            if why:
                self.fail("start", "ptyvisor-raw (systemd)", why)
        cli_per_round = max(1, count // 2 // self.rounds())  # count/2 CLI processes in all
        for case, cmd in {"echo": ["echo", "hi"], "true": ["true"]}.items():
            samples = {"forkpty": [], "ptyvisor-raw": []}
            cli, cli_base = [], []
            names = ["forkpty", "ptyvisor-raw", "ptyvisor (CLI)"]
            for r in range(self.rounds()):
                for c in names[r % len(names):] + names[:r % len(names)]:
                    if c in self.failed_contenders("start"):
                        continue
                    try:
                        if c == "ptyvisor (CLI)":
                            self.start_cli(cmd, cli_per_round, cli, cli_base)
                        else:
                            via = "pty" if c == "forkpty" else "ptyvisor"
                            samples[c].append(self.termbench("start", via, cmd, timeout=120, count=count, warmup=3))
                    except (Failure, ValueError, KeyError) as e:
                        self.fail("start", c, f"{case}: {e}")
            res = {}
            for c, runs in samples.items():
                if not runs:
                    continue
                res[c] = {}
                for key in ("first_output_us", "exit_us"):
                    vals = [run[key] for run in runs if run[key]["n"] > 0]
                    if vals:
                        res[c][key] = {k: statistics.median(v[k] for v in vals) for k in ("p50", "p99")}
            if cli:
                # Whole `ptyvisor run` processes, as the account, minus setpriv alone (the same
                # way systemd-run is timed below, minus nsenter); no first-output time.
                nb = statistics.median(cli_base)
                res["ptyvisor (CLI)"] = {"exit_us": {"p50": (statistics.median(cli) - nb) * 1e6,
                                                     "p99": (self.nearest_rank(cli, 99) - nb) * 1e6}}
            if self.sd_daemon:
                # Full runs: ptyvisor's systemd backend against systemd-run --pty, interleaved
                # (round r alternates which goes first). Same termbench measurement as the direct
                # backend, run as the account inside the harness; systemd-run as below.
                self.start_systemd_pair(case, cmd, count, res)
            elif self.harness and "exec" in self.harness:
                # Wall time of the whole systemd-run --pty process; nsenter's own cost is measured
                # and subtracted (it is not systemd-run's).
                shell = "echo hi" if case == "echo" else "true"
                base, times = [], []
                for _ in range(count // 2):
                    base.append(self.run(self.harness["exec"] + ["/bin/true"], 30, env=self.harness["env"])[0])
                    try:
                        times.append(self.run(self.systemd_run_cmd(shell), 60, env=self.harness["env"])[0])
                    except Failure as e:
                        self.fail("start", "systemd-run", str(e))
                        break
                if times:
                    nb = statistics.median(base)
                    res["systemd-run"] = {"exit_us": {"p50": (statistics.median(times) - nb) * 1e6,
                                                      "p99": (self.nearest_rank(times, 99) - nb) * 1e6}}
            if "forkpty" in res and "ptyvisor-raw" in res:
                res["ratio_exit_p50"] = res["ptyvisor-raw"]["exit_us"]["p50"] / res["forkpty"]["exit_us"]["p50"]
                if "first_output_us" in res["ptyvisor-raw"]:
                    res["ratio_first_output_p50"] = (res["ptyvisor-raw"]["first_output_us"]["p50"] /
                                                     res["forkpty"]["first_output_us"]["p50"])
            if "ptyvisor-raw (systemd)" in res and "systemd-run" in res:
                res["ratio_systemd_vs_systemd_run_exit_p50"] = (res["ptyvisor-raw (systemd)"]["exit_us"]["p50"] /
                                                                res["systemd-run"]["exit_us"]["p50"])
            for c, v in res.items():
                if isinstance(v, dict):
                    for key, st in v.items():
                        self.row("start", case, c, f"{key}.p50", round(st["p50"], 1), "us")
                        self.row("start", case, c, f"{key}.p99", round(st["p99"], 1), "us")
            out[case] = res
            log(f"start {case}: " + json.dumps(res, default=lambda x: round(x, 1)))
        self.results["start"] = out

    @staticmethod
    def nearest_rank(values, pct):
        s = sorted(values)
        return s[max(0, min(len(s) - 1, -(-pct * len(s) // 100) - 1))]

    def start_cli(self, cmd, n, times, base):
        """n whole `ptyvisor run --quiet -- CMD` processes as the account, each after one
        `setpriv ... true` (the cost of becoming the account, subtracted later)."""
        for _ in range(n):
            base.append(self.run(["true"], 30, account=True)[0])
            times.append(self.run([self.bin["ptyvisor"], "run", "--socket", self.socket, "--quiet", "--"] + cmd,
                                  60, account=True)[0])

    def start_systemd_pair(self, case, cmd, count, res):
        shell = "echo hi" if case == "echo" else "true"
        per = max(1, -(-(count // 2) // self.rounds()))  # count/2 systemd-run processes in all
        pair = ["ptyvisor-raw (systemd)", "systemd-run"]
        runs, base, times, broken = [], [], [], set()
        for r in range(self.rounds()):
            for c in (pair if r % 2 == 0 else pair[::-1]):
                if c in broken:
                    continue
                try:
                    if c == "systemd-run":
                        for _ in range(per):
                            base.append(self.run(self.harness["exec"] + ["/bin/true"], 30, env=self.harness["env"])[0])
                            times.append(self.run(self.systemd_run_cmd(shell), 60, env=self.harness["env"])[0])
                    else:
                        runs.append(self.termbench_systemd(cmd, count))
                except (Failure, ValueError, KeyError) as e:
                    broken.add(c)
                    self.fail("start", c, f"{case}: {e}")
        if runs:
            res["ptyvisor-raw (systemd)"] = {}
            for key in ("first_output_us", "exit_us"):
                vals = [run[key] for run in runs if run[key]["n"] > 0]
                if vals:
                    res["ptyvisor-raw (systemd)"][key] = {k: statistics.median(v[k] for v in vals) for k in ("p50", "p99")}
        if times:
            nb = statistics.median(base)
            res["systemd-run"] = {"exit_us": {"p50": (statistics.median(times) - nb) * 1e6,
                                              "p99": (self.nearest_rank(times, 99) - nb) * 1e6}}

    def hold(self, k, cmd):
        """Starts termbench hold as the account; returns the Popen once all k sessions run."""
        argv = self.as_account([self.bin["termbench"], "hold", "--via", "ptyvisor", "--socket", self.socket,
                                "--sessions", str(k), "--timeout", "120", "--"] + cmd)
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=self.tmp, env=self.account_env(), start_new_session=True)
        self.procs.append((p, lambda q: q.kill()))
        line = p.stdout.readline().decode()
        if not line:
            p.wait(timeout=10)
            raise Failure(f"hold {k} failed: {p.stderr.read().decode()[-300:]}")
        return p, json.loads(line)

    def release(self, p):
        p.stdin.close()
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def bench_memory(self):
        """Memory per idle session and the idle daemon's wake-ups (the 'idle' numbers)."""
        counts = [16, 64] if self.smoke else [16, 256, 1000]
        window = 1.0 if self.smoke else 5.0
        # One session first: the daemon opens a few things lazily (one descriptor stays).
        self.termbench("start", "ptyvisor", ["true"], timeout=30, count=1, warmup=0)
        time.sleep(0.5)
        idle = self.proc_stat()
        time.sleep(window)
        idle2 = self.proc_stat()
        out = {"idle": {"rss_kib": idle2["rss_kib"], "pss_kib": idle2["pss_kib"],
                        "wakeups_per_s": (idle2["switches"] - idle["switches"]) / window},
               "sessions": {}, "window_s": window}
        self.row("memory", "idle", "ptyvisord", "rss", idle2["rss_kib"], "KiB")
        for k in counts:
            try:
                p, info = self.hold(k, ["cat"])
                time.sleep(0.5)
                a = self.proc_stat()
                time.sleep(window)
                b = self.proc_stat()
                self.release(p)
                self.wait_daemon_quiet(idle["fds"])
            except (Failure, ValueError) as e:
                self.fail("memory", "ptyvisor-raw", f"{k} sessions: {e}")
                continue
            per = (b["rss_kib"] - idle2["rss_kib"]) / k
            r = {"rss_kib": b["rss_kib"], "pss_kib": b["pss_kib"], "per_session_kib": per,
                 "fds_per_session": (b["fds"] - idle["fds"]) / k, "start_all_s": info["seconds"],
                 "wakeups_per_s": (b["switches"] - a["switches"]) / window,
                 "runs_per_s": (b["runs"] - a["runs"]) / window, "cpu_s": b["cpu"] - a["cpu"]}
            out["sessions"][str(k)] = r
            self.row("memory", f"{k} idle sessions", "ptyvisord", "rss per session", round(per, 1), "KiB")
            self.row("idle", f"{k} idle sessions", "ptyvisord", "wake-ups", r["wakeups_per_s"], "1/s")
            log(f"memory {k}: {json.dumps(r)}")
        after = self.proc_stat()
        out["after"] = {"rss_kib": after["rss_kib"], "fds": after["fds"]}
        self.results["memory"] = out

    # ---- persistent sessions (protocol version 2) -------------------------------------------

    def daemon_memory(self, pid):
        """A daemon's memory, as the kernel accounts it: VmRSS and its parts and VmPTE (its
        page tables) from /proc/PID/status, Pss from /proc/PID/smaps_rollup, and its memfds
        (the output logs): how many, their size and the bytes allocated to them (st_blocks *
        512, through /proc/PID/fd, which needs root). KiB, but `memfds` and `fds` (counts)."""
        m = {}
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmPTE"):
                    m[k] = int(line.split()[1])
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("Pss", "Pss_Anon", "Pss_Shmem"):
                    m[k] = int(line.split()[1])
        memfds = size = allocated = fds = 0
        for fd in os.listdir(f"/proc/{pid}/fd"):
            fds += 1
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    continue
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:  # closed meanwhile
                continue
            memfds += 1
            size += st.st_size
            allocated += st.st_blocks * 512
        m.update({"memfds": memfds, "memfd_size": size // 1024, "memfd_allocated": allocated // 1024, "fds": fds})
        return m

    @staticmethod
    def cpu_seconds(pid):
        """User + system CPU seconds of a process, all its threads (10 ms ticks)."""
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def context_switches(pid):
        """(voluntary, involuntary) context switches, summed over a process's threads."""
        vol = inv = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            vol += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches"):
                            inv += int(line.split()[1])
            except OSError:  # a thread that ended meanwhile
                pass
        return vol, inv

    def wakeups(self, pid, window):
        a = self.context_switches(pid)
        time.sleep(window)
        b = self.context_switches(pid)
        return {"voluntary_per_s": (b[0] - a[0]) / window, "involuntary_per_s": (b[1] - a[1]) / window,
                "voluntary": b[0] - a[0], "involuntary": b[1] - a[1], "window_s": window}

    def bench_idle_sessions(self):
        """K detached idle sessions (`cat`) on a fresh daemon of their own: its memory per
        session, its wake-ups while they idle, and LIST latency with all of them listed."""
        k = 50 if self.smoke else 1000
        window = 1.0 if self.smoke else 5.0
        lists, warm = (10, 2) if self.smoke else (50, 5)
        # A daemon of its own, so that no earlier benchmark has grown its heap (freed memory
        # that it would reuse, and the per-session figure would hide) or left sessions in it.
        sock = os.path.join(self.tmp, "ptyvisor-idle.sock")
        daemon, cgroup = self.launch_daemon("-idle", sock)
        if cgroup:
            self.extra_cgroups.append(cgroup)
        pid = daemon.pid
        ids = []
        out = {"sessions": k, "commands": {}, "loadavg": {"before": os.getloadavg()}}
        try:
            # One session first, as in `memory`: code and lazily opened things, once.
            self.termbench("start", "ptyvisor", ["true"], timeout=30, count=1, warmup=0, sock=sock)
            time.sleep(0.5)
            before = self.daemon_memory(pid)
            idle0 = self.wakeups(pid, window)
            j, out["commands"]["start"] = self.sessionbench("idle-start", ["--sessions", k, "--window", 4, "--", "cat"],
                                                            timeout=300, sock=sock)
            ids = j["ids"]
            out["start_s"] = j["seconds"]
            if len(ids) != k or len(set(ids)) != k:
                raise Failure(f"idle-start reported {len(set(ids))} distinct sessions, {k} asked for")
            time.sleep(1.0)  # the starters' connections are closed and handled
            after = self.daemon_memory(pid)
            idle = self.wakeups(pid, window)
            c0 = self.cpu_seconds(pid)
            lj, out["commands"]["list"] = self.sessionbench("list", ["--count", lists, "--warmup", warm, "--expect", k],
                                                            timeout=120, sock=sock)
            lj["daemon_cpu_ms_per_list"] = (self.cpu_seconds(pid) - c0) * 1000 / (lists + warm)
            lj["requests"] = lists + warm
            after_list = self.daemon_memory(pid)
            kj, out["commands"]["kill"] = self.sessionbench("kill", ["--window", 4], timeout=300, sock=sock,
                                                            input="\n".join(ids).encode())
            out["commands"]["kill"] += " < ids"
            if kj["killed"] != len(ids):
                raise Failure(f"kill ended {kj['killed']} of {len(ids)} sessions")
        finally:
            out["loadavg"]["after"] = os.getloadavg()
            daemon.send_signal(signal.SIGTERM)  # ends whatever is left, each session cleaned up
            try:
                daemon.wait(timeout=120)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
            if daemon.returncode != 0:
                self.fail("idle-sessions", "ptyvisord", f"the idle-sessions daemon exited with {daemon.returncode}")
            # Its cgroup goes in stop_all(): the kernel may still be releasing it now.
        per = {key: (after[key] - before[key]) / k for key in before}
        # RSS counts the memfd pages the daemon has mapped and touched (RssShmem) too; the
        # total counts each page once: anonymous and file RSS, the memfds' allocation, and
        # the page tables that map them.
        def total(m):
            return m["VmRSS"] - m["RssShmem"] + m["memfd_allocated"] + m["VmPTE"]
        tot = (total(after) - total(before)) / k
        out.update({"before": before, "after": after, "after_list": after_list, "per_session_kib": per,
                    "total_per_session_kib": tot, "wakeups_0": idle0, "wakeups": idle, "list": lj,
                    "kill_s": kj["seconds"]})
        self.results["idle-sessions"] = out
        case = f"{k} detached idle sessions"
        for key, name in (("VmRSS", "RSS"), ("Pss", "PSS"), ("memfd_allocated", "memfd allocated"), ("VmPTE", "page tables")):
            self.row("idle-sessions", case, "ptyvisord", f"{name} per session", round(per[key], 2), "KiB")
        self.row("idle-sessions", case, "ptyvisord", "total per session", round(tot, 2), "KiB")
        self.row("idle-sessions", case, "ptyvisord", "voluntary switches", idle["voluntary_per_s"], "1/s")
        self.row("idle-sessions", case, "sessionbench", "LIST p50", round(lj["us"]["p50"] / 1000, 3), "ms")
        self.row("idle-sessions", case, "sessionbench", "LIST p99", round(lj["us"]["p99"] / 1000, 3), "ms")
        log(f"idle-sessions: {json.dumps({'per_session_kib': per, 'total': tot, 'wakeups': idle, 'list': lj})}")

    def bench_replay(self):
        """ATTACH from=start to a detached idle session whose log is full, to its last byte."""
        count, warm = (10, 2) if self.smoke else (200, 10)
        lines = 400000  # `seq 1 400000` prints 3088895 bytes with \\r\\n: more than the 2 MiB log
        length = 2 << 20  # output_log_bytes, the default: the daemon's configuration here leaves it
        la = os.getloadavg()
        j, cmd = self.sessionbench("replay", ["--count", count, "--warmup", warm, "--lines", lines,
                                              "--expect-length", length], timeout=300)
        j["command"] = cmd
        j["loadavg"] = {"before": la, "after": os.getloadavg()}
        self.results["replay"] = j
        for kind, st in j["us"].items():
            self.row("replay", f"from=start, {j['length']} bytes", kind, "p50", round(st["p50"] / 1000, 3), "ms")
            self.row("replay", f"from=start, {j['length']} bytes", kind, "p99", round(st["p99"] / 1000, 3), "ms")
        log("replay: " + ", ".join(f"{k} p50 {v['p50'] / 1000:.2f} ms p99 {v['p99'] / 1000:.2f} ms" for k, v in j["us"].items()))

    def bench_observers(self):
        """One client against one controller + 8 observers, the same output, interleaved with
        forkpty reading the same command (the physical limit, for reference)."""
        n = 8 << 20 if self.smoke else 256 << 20
        ref = "forkpty (reference, no daemon)"
        configs = {ref: None, "1 client (controller)": 0, f"1 controller + {OBSERVERS} observers": OBSERVERS}
        names = list(configs)
        samples = {c: [] for c in names}
        by_round = []  # {config: MB/s} of each round: the three ran back to back
        commands = {}
        la = os.getloadavg()
        for r in range(self.rounds()):
            by_round.append({})
            for c in names[r % len(names):] + names[:r % len(names)]:
                if c in self.failed_contenders("observers"):
                    continue
                # No retry: a run in which any reader failed to account for every byte fails
                # its configuration (sessionbench exits 1 and says which reader).
                try:
                    if configs[c] is None:
                        cmd = ["head", "-c", str(n), "/dev/zero"]
                        j = self.termbench("throughput", "pty", cmd, timeout=600)
                        commands[c] = (os.path.relpath(self.bin["termbench"], ROOT) + " throughput --via pty --timeout 600 -- "
                                       + " ".join(cmd))
                        if j["bytes"] != n:
                            raise Failure(f"{j['bytes']} bytes arrived, {n} expected; sample discarded")
                        mbps = n / j["seconds"] / 1e6
                        j = {"controller_mbps": mbps, "all_mbps": mbps, "observer_lost": 0, "observer_received": 0,
                             "observer_dropped_notices": 0}
                    else:
                        c0 = self.cpu_seconds(self.daemon.pid)
                        j, commands[c] = self.sessionbench("observers", ["--observers", configs[c], "--bytes", n], timeout=600)
                        j["daemon_cpu_s"] = self.cpu_seconds(self.daemon.pid) - c0
                except (Failure, ValueError, KeyError) as e:
                    self.fail("observers", c, str(e))
                    continue
                samples[c].append(j)
                by_round[-1][c] = j["controller_mbps"]
        out = {"bytes": n, "configs": {}, "commands": commands, "reference": ref, "by_round": by_round,
               "loadavg": {"before": la, "after": os.getloadavg()}}
        for c, runs in samples.items():
            if not runs:
                continue
            out["configs"][c] = {
                "runs": len(runs),
                "controller_mbps": statistics.median(x["controller_mbps"] for x in runs),
                "controller_mbps_min": min(x["controller_mbps"] for x in runs),
                "controller_mbps_max": max(x["controller_mbps"] for x in runs),
                "all_mbps": statistics.median(x["all_mbps"] for x in runs),
                "observer_lost": sum(x["observer_lost"] for x in runs),
                "observer_received": sum(x["observer_received"] for x in runs),
                "observer_dropped_notices": sum(x["observer_dropped_notices"] for x in runs),
                "samples": runs}
            if all("daemon_cpu_s" in x for x in runs):
                out["configs"][c]["daemon_cpu_s"] = statistics.median(x["daemon_cpu_s"] for x in runs)
        base = out["configs"].get(names[1])
        fp = out["configs"].get(ref)
        for c, v in out["configs"].items():
            if base:
                v["ratio_controller"] = v["controller_mbps"] / base["controller_mbps"]
                v["ratio_all"] = v["all_mbps"] / base["controller_mbps"]
            if fp:
                v["ratio_forkpty"] = v["controller_mbps"] / fp["controller_mbps"]
            # The machine's load can change between rounds more than between two runs of one
            # round: the ratio within each round, and their median, is the paired statistic.
            paired = [rd[c] / rd[names[1]] for rd in by_round if c in rd and names[1] in rd]
            if paired and c != ref:
                v["round_ratios"] = paired
                v["median_round_ratio"] = statistics.median(paired)
            self.row("observers", c, "sessionbench" if c != ref else "forkpty", "MB/s", round(v["controller_mbps"], 2), "MB/s",
                     round(v["ratio_forkpty"], 3) if fp else None)
        self.results["observers"] = out
        log("observers: " + ", ".join(f"{c} {v['controller_mbps']:.1f} MB/s (lost {v['observer_lost']})"
                                      for c, v in out["configs"].items()))

    def bench_scale(self):
        counts = [1, 16] if self.smoke else [1, 16, 256]
        secs = 1.0 if self.smoke else 3.0
        out = {"cpus": os.cpu_count(), "seconds": secs}
        for k in counts:
            samples = {"forkpty": [], "ptyvisor-raw": []}
            before = self.proc_stat()["fds"]
            for r in range(max(1, self.rounds() - 2)):
                order = ["forkpty", "ptyvisor-raw"] if r % 2 == 0 else ["ptyvisor-raw", "forkpty"]
                for c in order:
                    via = "pty" if c == "forkpty" else "ptyvisor"
                    try:
                        j = self.termbench("throughput", via, ["cat", "/dev/zero"], timeout=120, sessions=k, seconds=secs)
                        samples[c].append(j["mbps"])
                    except (Failure, ValueError, KeyError) as e:
                        self.fail("scale", c, f"{k} sessions: {e}")
                self.wait_daemon_quiet(before)
            res = {c: statistics.median(v) for c, v in samples.items() if v}
            out[str(k)] = res
            for c, m in res.items():
                self.row("scale", f"{k} busy sessions", c, "MB/s", round(m, 2), "MB/s",
                         round(m / res["forkpty"], 3) if res.get("forkpty") else None)
            log(f"scale {k}: {res}")
        self.results["scale"] = out

    def bench_cpu(self):
        n = 32 << 20 if self.smoke else 1 << 30
        runs = []
        for _ in range(1 if self.smoke else 3):
            a = self.proc_stat()
            t0 = time.perf_counter()
            try:
                self.termbench("throughput", "ptyvisor", ["head", "-c", str(n), "/dev/zero"], timeout=300)
            except (Failure, ValueError, KeyError) as e:
                self.fail("cpu", "ptyvisor-raw", str(e))
                return
            wall = time.perf_counter() - t0
            b = self.proc_stat()
            runs.append({"cpu_s_per_gb": (b["cpu"] - a["cpu"]) / (n / 1e9), "wall_s": wall})
        med = statistics.median(r["cpu_s_per_gb"] for r in runs)
        self.results["cpu"] = {"bytes": n, "runs": runs, "cpu_s_per_gb": med,
                               "note": "daemon user+sys from /proc/PID/stat, 10 ms ticks"}
        self.row("cpu", "head -c N /dev/zero", "ptyvisord", "cpu per GB", round(med, 3), "s")
        log(f"cpu: {med:.3f} s per GB")

    def bench_syscalls(self):
        if not shutil.which("strace"):
            self.skip("syscalls", "ptyvisord", "strace is not installed")
            return
        n = 8 << 20 if self.smoke else 64 << 20
        outf = os.path.join(self.tmp, "strace.txt")
        # Every thread of the daemon, but not -f: the session's command is the daemon's child
        # (fork+exec), and -f would count its reads and writes as the daemon's.
        tids = sorted(os.listdir(f"/proc/{self.daemon.pid}/task"))
        st = subprocess.Popen(["strace", "-c", "-o", outf] + [a for t in tids for a in ("-p", t)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append((st, lambda q: q.send_signal(signal.SIGINT)))
        time.sleep(0.5)
        try:
            self.termbench("throughput", "ptyvisor", ["head", "-c", str(n), "/dev/zero"], timeout=300)
        except (Failure, ValueError, KeyError) as e:
            self.fail("syscalls", "ptyvisor-raw", str(e))
        time.sleep(0.3)
        st.send_signal(signal.SIGINT)
        st.wait(timeout=30)
        calls, total = {}, 0
        with open(outf) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 5 and parts[0][0].isdigit():
                    name = parts[-1]
                    cnt = int(parts[3])
                    if name == "total":
                        total = cnt
                    else:
                        calls[name] = cnt
        mb = n / 1e6
        per = {k: v / mb for k, v in sorted(calls.items(), key=lambda kv: -kv[1])}
        self.results["syscalls"] = {"bytes": n, "total": total, "per_mb": total / mb, "by_call_per_mb": per}
        self.row("syscalls", "head -c N /dev/zero", "ptyvisord", "syscalls per MB", round(total / mb, 1), "1/MB")
        log(f"syscalls: {total / mb:.1f} per MB; " + ", ".join(f"{k} {v:.1f}" for k, v in list(per.items())[:6]))

    def bench_micro(self):
        if not os.path.exists(self.bin["micro"]):
            self.skip("micro", "micro_protocol", "Google Benchmark was not found at configure time")
            return
        jf = os.path.join(self.out, "micro_protocol.json")
        self.run([self.bin["micro"], "--benchmark_min_time=" + ("0.02" if self.smoke else "0.5"),
                  "--benchmark_format=console", f"--benchmark_out={jf}", "--benchmark_out_format=json"], 300)
        with open(jf) as f:
            data = json.load(f)
        res = {}
        for b in data["benchmarks"]:
            res[b["name"]] = {"ns": b["real_time"] if b.get("time_unit") == "ns" else b["real_time"],
                              "time_unit": b.get("time_unit"), "gb_per_s": b.get("bytes_per_second", 0) / 1e9}
            self.row("micro", b["name"], "protocol", "GB/s", round(res[b["name"]]["gb_per_s"], 3), "GB/s")
        self.results["micro"] = res

    # ---- reports -----------------------------------------------------------------------------

    def machine(self):
        def cmd(a):
            try:
                return subprocess.run(a, capture_output=True, text=True, timeout=10).stdout.strip()
            except Exception:  # noqa: BLE001
                return ""
        lscpu = {}
        for line in cmd(["lscpu"]).splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                lscpu[k.strip()] = v.strip()
        return {"nproc": cmd(["nproc"]), "model": lscpu.get("Model name"), "hypervisor": lscpu.get("Hypervisor vendor"),
                "uname": cmd(["uname", "-srvmo"]), "mem": cmd(["sh", "-c", "grep MemTotal /proc/meminfo"]),
                "python": platform.python_version(), "git": cmd(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
                # Named in every table: a run of a tree with uncommitted changes says so.
                "dirty": bool(cmd(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]))}

    def write_reports(self, argv):
        shown, skip_next = [], False
        for a in argv:  # run.sh passes --build itself
            if skip_next or a == "--build":
                skip_next = not skip_next
                continue
            shown.append(a)
        doc = {"command": "bench/run.sh " + " ".join(shown), "smoke": self.smoke, "machine": self.machine(),
               "results": self.results, "failures": self.failures, "skips": self.skips,
               "time": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump(doc, f, indent=1, default=lambda x: round(x, 3))
        with open(os.path.join(self.out, "results.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(self.rows[0].keys()) if self.rows else ["bench"])
            w.writeheader()
            w.writerows(self.rows)
        with open(os.path.join(self.out, "results.md"), "w") as f:
            f.write(self.markdown(doc))
        self.plot()

    def markdown(self, doc):
        R = self.results
        m = doc["machine"]
        L = [f"Command: `{doc['command']}` ({doc['time']}, commit {m['git']})", "",
             f"Machine: {m['nproc']} CPUs, {m['model']} ({m['hypervisor'] or 'bare metal'}), {m['mem']}, {m['uname']}", ""]
        if "throughput" in R:
            t = R["throughput"]
            rb = t["relayed_bytes"]
            L += [f"### Output throughput, {t['bytes'] >> 20} MiB, median MB/s (ratio to forkpty)", "",
                  "Every sample counted is one whose reader received exactly the bytes the terminal must relay ("
                  + ", ".join(f"{k}: {v}" for k, v in rb.items()) + "); a failed or short sample is not retried, it "
                  "fails its contender (see Failures).", "",
                  "| contender | " + " | ".join(t["streams"]) + " |", "| --- |" + " --- |" * len(t["streams"])]
            names = []
            for s in t["streams"].values():
                names += [c for c in s if c not in names]
            for c in names:
                cells = []
                for s in t["streams"].values():
                    v = s.get(c)
                    ratio = f"{v['ratio_vs_forkpty']:.2f}x" if v and v["ratio_vs_forkpty"] else "no forkpty figure"
                    cells.append(f"{v['median_mbps']:.1f} ({ratio})" if v else "n/a")
                L.append(f"| {c} | " + " | ".join(cells) + " |")
            L.append("")
        if "latency" in R:
            L += ["### Keystroke echo latency, µs (each percentile is the median over runs of that run's percentile)", "",
                  "ptyvisor-raw is the raw protocol client (termbench), not the CLI. The differences are "
                  "ptyvisor-raw's percentile minus forkpty's: a p99 difference is not the p99 of the latency added.", "",
                  "| case | forkpty p50 | forkpty p99 | ptyvisor-raw p50 | ptyvisor-raw p99 | p50 difference | p99 difference |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
            for case, r in R["latency"].items():
                f_, p_, a_ = r.get("forkpty", {}), r.get("ptyvisor-raw", {}), r.get("difference", {})
                g = lambda d, k: f"{d[k]:.1f}" if k in d else "n/a"  # noqa: E731
                L.append(f"| {case} | {g(f_, 'p50')} | {g(f_, 'p99')} | {g(p_, 'p50')} | {g(p_, 'p99')} | "
                         f"{g(a_, 'p50 difference')} | {g(a_, 'p99 difference')} |")
            L.append("")
        if "fairness" in R:
            fr = R["fairness"]
            L += [f"### Fairness: echo latency of one typed session while {fr['floods']} others flood output", "",
                  f"Each contender relays {fr['floods'] + 1} terminals: {fr['floods']} run `termbench flood` (`yes`, counted), "
                  "one runs `stty raw -echo; cat`, typed into by `termbench latency --via pty --echo any` through the "
                  "contender's client (the CLI, `script`, `ssh -tt`, `tmux attach`). "
                  f"{fr['count']} keystrokes per run after {fr['warmup']} untimed; each percentile is the median over "
                  f"{fr['rounds']} rounds of that run's nearest-rank percentile. Flood MB/s: what the floods' terminals "
                  "accepted while the keystrokes were timed, summed (median over rounds).", "",
                  "| contender | echo p50 ms | echo p99 ms | floods MB/s |", "| --- | --- | --- | --- |"]
            for c, v in fr["contenders"].items():
                L.append(f"| {c} | {v['p50_ms']:.2f} | {v['p99_ms']:.2f} | {v['flood_mbps']:.1f} |")
            L.append("")
        if "start" in R:
            L += ["### Session start, µs (p50 / p99)", "",
                  "ptyvisor-raw: termbench's raw protocol client, from connect() (median over runs of each run's "
                  "percentile). ptyvisor (CLI) and systemd-run: whole processes, minus the cost of setpriv or "
                  "nsenter alone (nearest-rank p99 over every process).", "",
                  "| command | contender | first output | session end | ratio (end, p50) |", "| --- | --- | --- | --- | --- |"]
            for case, r in R["start"].items():
                for c in ("forkpty", "ptyvisor-raw", "ptyvisor (CLI)", "ptyvisor-raw (systemd)", "systemd-run"):
                    if c not in r:
                        continue
                    fo = r[c].get("first_output_us")
                    ex = r[c].get("exit_us")
                    ratio = ex["p50"] / r["forkpty"]["exit_us"]["p50"] if "forkpty" in r and ex else None
                    vs = r.get("ratio_systemd_vs_systemd_run_exit_p50") if c == "ptyvisor-raw (systemd)" else None
                    L.append(f"| `{case}` | {c} | " + (f"{fo['p50']:.0f} / {fo['p99']:.0f}" if fo else "–") + " | "
                             + (f"{ex['p50']:.0f} / {ex['p99']:.0f}" if ex else "–") + " | "
                             + (f"{ratio:.2f}x" if ratio else "")
                             + (f" ({vs:.2f}x of systemd-run)" if vs else "") + " |")
            L.append("")
        if "memory" in R:
            mm = R["memory"]
            L += ["### Memory and idle wake-ups of ptyvisord", "",
                  "| idle sessions | RSS KiB | RSS per session KiB | fds per session | wake-ups/s |", "| --- | --- | --- | --- | --- |",
                  f"| 0 | {mm['idle']['rss_kib']} | – | – | {mm['idle']['wakeups_per_s']:.1f} |"]
            for k, v in mm["sessions"].items():
                L.append(f"| {k} | {v['rss_kib']} | {v['per_session_kib']:.1f} | {v['fds_per_session']:.1f} | "
                         f"{v['wakeups_per_s']:.1f} |")
            L += ["", f"RSS after the sessions ended: {mm['after']['rss_kib']} KiB.", ""]
        persistent = [n for n in ("idle-sessions", "replay", "observers") if n in R]
        if persistent:
            stamp = lambda name: (f"Commit {m['git']}" + (" (with uncommitted changes)" if m.get("dirty") else "")  # noqa: E731
                                  + f"; this run: `{doc['command']}`; this table alone: `bench/run.sh --only {name}"
                                  + (" --smoke" if doc["smoke"] else "") + "`.")
            goals = []
        if "idle-sessions" in R:
            s = R["idle-sessions"]
            k, b, a, per = s["sessions"], s["before"], s["after"], s["per_session_kib"]
            L += [f"### Persistent sessions: {k} idle detached sessions", "", stamp("idle-sessions"), "",
                  f"`cat` in {k} detached sessions, no client attached, started 4 at a time (`{s['commands']['start']}`, "
                  "as the account), on a fresh daemon of their own (same configuration, one session run and ended "
                  "first), so that no earlier benchmark's freed heap hides what they take. Its memory was read before "
                  f"the first START and 1 s after the last STARTED; per session is the difference divided by {k}. KiB "
                  f"throughout. Load average (1, 5, 15 min) before: {self.loadavg(s)}.", "",
                  "| measure | before | with the sessions | per session |", "| --- | --- | --- | --- |"]
            for key, name in (("VmRSS", "RSS (`VmRSS`, /proc/PID/status)"), ("RssAnon", "of which anonymous (`RssAnon`)"),
                              ("RssShmem", "of which output-log pages mapped and touched (`RssShmem`)"),
                              ("Pss", "PSS (`Pss`, /proc/PID/smaps_rollup)"),
                              ("VmPTE", "page tables (`VmPTE`; kernel memory, not in RSS)"),
                              ("memfd_allocated", "output logs: memfd bytes allocated (`st_blocks` × 512)"),
                              ("memfd_size", "output logs: memfd size (`st_size`; pages are allocated when written)"),
                              ("memfds", "output logs: memfds (count)"), ("fds", "descriptors (count)")):
                L.append(f"| {name} | {b[key]} | {a[key]} | {per[key]:.2f} |")
            tot = s["total_per_session_kib"]
            L.append(f"| **daemon total: RSS − RssShmem + memfd allocated + page tables** (each page once) | | | **{tot:.2f}** |")
            w0, w = s["wakeups_0"], s["wakeups"]
            lj = s["list"]
            lu = lj["us"]
            L += ["", "Other kernel memory that each session costs (its terminal pair, socket buffers, pidfd, cgroup, the "
                  "memfd's mapping, and the session's own processes) is in none of these figures. "
                  f"After the LISTs below, RSS was {s['after_list']['VmRSS']} KiB (anonymous {s['after_list']['RssAnon']}): "
                  "memory that the LIST replies used and the allocator kept.", "",
                  f"Wake-ups: the change in context switches of all the daemon's threads (/proc/PID/task/*/status) over "
                  f"{w['window_s']:.0f} s: with 0 sessions {w0['voluntary_per_s']:.1f}/s voluntary, "
                  f"{w0['involuntary_per_s']:.1f}/s involuntary; with {k} idle sessions {w['voluntary_per_s']:.1f}/s voluntary, "
                  f"{w['involuntary_per_s']:.1f}/s involuntary ({w['voluntary']} and {w['involuntary']} in the window).", "",
                  f"LIST with {k} sessions: {lu['n']} LISTs one after another (after untimed warm-ups), each timed from the "
                  "send() of LIST, on a connection already made, to the arrival of the whole SESSIONS frame "
                  f"({lj['payload_bytes']} bytes). Nearest-rank p50 {lu['p50'] / 1000:.2f} ms, p99 {lu['p99'] / 1000:.2f} ms, "
                  f"max {lu['max'] / 1000:.2f} ms. The daemon's CPU time (user + system, /proc/PID/stat, 10 ms ticks) "
                  f"over all {lu['n']} LISTs and the warm-ups, per LIST: {lj['daemon_cpu_ms_per_list']:.2f} ms "
                  f"(± {10 / lj['requests']:.2f} ms: one tick over them all). "
                  f"The reply named **{lj['listed']} of the {k}** sessions (`{s['commands']['list']}`).", ""]
            goals += [(f"memory per idle session ≤ {GOAL_IDLE_KIB:.0f} KiB ({k} sessions)",
                       f"{tot:.2f} KiB in all (RSS {per['VmRSS']:.2f}, PSS {per['Pss']:.2f}, memfd allocated "
                       f"{per['memfd_allocated']:.2f}, page tables {per['VmPTE']:.2f})", self.verdict(tot, GOAL_IDLE_KIB, "KiB")),
                      (f"0 wake-ups/s with {k} idle sessions", f"{w['voluntary_per_s']:.1f}/s voluntary context switches",
                       self.verdict(w["voluntary_per_s"], 0, "/s")),
                      (f"LIST ≤ {GOAL_LIST_MS:.0f} ms with {k} sessions",
                       f"p50 {lu['p50'] / 1000:.2f} ms, p99 {lu['p99'] / 1000:.2f} ms; {lj['listed']} of {k} listed",
                       self.verdict(lu["p99"] / 1000, GOAL_LIST_MS, "ms", at="p99")
                       + ("" if lj["listed"] == k else f"; and {k - lj['listed']} sessions missing from the reply"))]
        if "replay" in R:
            r = R["replay"]
            L += [f"### Persistent sessions: replay of a full log (ATTACH from=start)", "", stamp("replay"), "",
                  f"One detached session, `sh -c 'seq 1 {r['lines']}; exec sleep 3600'`, idle once `seq` is done; its log "
                  f"holds offsets [{r['start']}, {r['end']}): {r['length']} bytes, full (the log is 2 MiB; `seq` wrote "
                  f"{r['end']}). Each request is timed from just before the send() of the request, on a connection "
                  "already made, to the return of the read() that completed the log's bytes; every reply was compared "
                  "byte for byte with what `seq` printed. The three kinds are interleaved (rotated each iteration); "
                  f"nearest-rank percentiles over {r['count']} of each, after {r['warmup']} untimed. `{r['command']}`, as the "
                  f"account. Load average (1, 5, 15 min) before: {self.loadavg(r)}.", "",
                  f"| request | n | p50 ms | p99 ms | max ms | goal ≤ {GOAL_REPLAY_MS:.0f} ms |", "| --- | --- | --- | --- | --- | --- |"]
            names = {"observer": "ATTACH, observer", "controller": "ATTACH, controller (DETACH after, untimed)",
                     "read": "READ (one-shot request; for comparison)"}
            for kind, st in r["us"].items():
                v = "–" if kind == "read" else self.verdict(st["p99"] / 1000, GOAL_REPLAY_MS, "ms", at="p99")
                L.append(f"| {names.get(kind, kind)} | {st['n']} | {st['p50'] / 1000:.2f} | {st['p99'] / 1000:.2f} | "
                         f"{st['max'] / 1000:.2f} | {v} |")
                if kind != "read":
                    goals.append((f"replay of a full log ≤ {GOAL_REPLAY_MS:.0f} ms ({names[kind]})",
                                  f"p50 {st['p50'] / 1000:.2f} ms, p99 {st['p99'] / 1000:.2f} ms",
                                  self.verdict(st["p99"] / 1000, GOAL_REPLAY_MS, "ms", at="p99")))
            L.append("")
        if "observers" in R:
            o = R["observers"]
            n = o["bytes"]
            L += [f"### Persistent sessions: {OBSERVERS} observers", "", stamp("observers"), "",
                  f"`head -c {n} /dev/zero` in a bound session (`sh -c 'stty -echo; printf R; read x; exec head -c {n} "
                  "/dev/zero'`), released by the controller's newline once every observer has attached from=start. Each "
                  "reader is a thread of sessionbench reading its own socket as fast as it can and checking every byte "
                  "(R, then zeros). **controller MB/s** = N / (newline sent → the controller's last byte): the program's "
                  "rate, since a bound session waits for its controller. **all readers MB/s** = N / (newline sent → the "
                  "last byte of the slowest reader). Medians over the runs of each configuration, interleaved (the order "
                  "rotated each round). **lost** = the bytes DROPPED notices told the observers they would never get, "
                  "summed over observers and runs; every observer's bytes received + lost came to N + 1, and the "
                  "controller lost none. The reference is termbench's forkpty reader of the same command, timed from "
                  "forkpty() to EIO, its byte count checked. MB/s is 10^6 bytes per second. **daemon CPU** is the "
                  "median over runs of ptyvisord's user + system time (/proc/PID/stat, 10 ms ticks) from the start to "
                  "the end of one sessionbench process, session start included. Load average (1, 5, 15 "
                  f"min) before: {self.loadavg(o)}.", "",
                  "| configuration | runs | controller MB/s, median (min–max) | all readers MB/s, median | observers: bytes received / lost (DROPPED notices), all runs | ratio of medians to 1 client | median of per-round ratios to 1 client | ratio of medians to forkpty | daemon CPU s per run, median |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for c, v in o["configs"].items():
                obs = (f"{v['observer_received']} / {v['observer_lost']} ({v['observer_dropped_notices']})"
                       if "observers" in c else "–")
                ratio = f"{v['ratio_controller']:.3f}x" if "ratio_controller" in v and c != o.get("reference") else "–"
                rf = f"{v['ratio_forkpty']:.3f}x" if "ratio_forkpty" in v else "n/a"
                pr = f"{v['median_round_ratio']:.3f}x" if "median_round_ratio" in v else "–"
                L.append(f"| {c} | {v['runs']} | {v['controller_mbps']:.1f} ({v['controller_mbps_min']:.1f}–"
                         f"{v['controller_mbps_max']:.1f}) | {v['all_mbps']:.1f} | {obs} | {ratio} | {pr} | {rf} | "
                         + (f"{v['daemon_cpu_s']:.2f}" if "daemon_cpu_s" in v else "–") + " |")
            rounds_txt = "; ".join(f"round {i + 1}: " + ", ".join(f"{c.split(' (')[0]} {x:.1f}" for c, x in rd.items())
                                   for i, rd in enumerate(o.get("by_round", [])))
            L += ["", f"Controller MB/s of each round, in the order run: {rounds_txt}."]
            L += ["", "Commands (sessionbench as the account, termbench --via pty as root): "
                  + "; ".join(f"`{cmd}`" for cmd in o["commands"].values()) + ".", ""]
            many = [v for c, v in o["configs"].items() if "observers" in c and "ratio_controller" in v]
            if many:
                v = many[0]
                goals.append((f"throughput with 1 controller + {OBSERVERS} observers ≥ {GOAL_OBSERVER_RATIO}x of 1 client",
                              f"ratio of medians {v['ratio_controller']:.3f}x (controller), {v['ratio_all']:.3f}x (all "
                              f"readers done); median of per-round ratios {v.get('median_round_ratio', float('nan')):.3f}x; "
                              f"{v['observer_lost']} bytes DROPPED to observers",
                              "ratio of medians: " + self.verdict(v["ratio_controller"], GOAL_OBSERVER_RATIO, "x", higher=True)
                              + ("; per-round: " + self.verdict(v["median_round_ratio"], GOAL_OBSERVER_RATIO, "x", higher=True)
                                 if "median_round_ratio" in v else "")))
        if persistent and goals:
            L += ["### Persistent sessions: against the goals", "", "| goal | measured | verdict |", "| --- | --- | --- |"]
            L += [f"| {g} | {mv} | {vd} |" for g, mv, vd in goals] + [""]
        if "scale" in R:
            sc = R["scale"]
            L += [f"### Aggregate throughput, `cat /dev/zero` per session, {sc['seconds']} s window, {sc['cpus']} CPUs, MB/s", "",
                  "| busy sessions | forkpty | ptyvisor-raw | ratio |", "| --- | --- | --- | --- |"]
            for k, v in sc.items():
                if isinstance(v, dict):
                    f_, p_ = v.get("forkpty"), v.get("ptyvisor-raw")
                    L.append(f"| {k} | {f_ or 0:.1f} | {p_ or 0:.1f} | " + (f"{p_ / f_:.2f}x" if f_ and p_ else "n/a") + " |")
            L.append("")
        if "cpu" in R or "syscalls" in R:
            L += ["### Cost per byte relayed (ptyvisord)", ""]
            if "cpu" in R:
                L.append(f"- CPU (user+sys) per GB: {R['cpu']['cpu_s_per_gb']:.3f} s ({R['cpu']['bytes'] >> 20} MiB of zeros)")
            if "syscalls" in R:
                s = R["syscalls"]
                top = ", ".join(f"{k} {v:.1f}" for k, v in list(s["by_call_per_mb"].items())[:8])
                L.append(f"- syscalls per MB: {s['per_mb']:.1f} (strace -c on every daemon thread, {s['bytes'] >> 20} MiB): {top}")
            L.append("")
        if "micro" in R:
            L += ["### Protocol micro-benchmarks (Google Benchmark)", "", "| benchmark | time | payload GB/s |", "| --- | --- | --- |"]
            for k, v in R["micro"].items():
                L.append(f"| {k} | {v['ns']:.0f} {v['time_unit']} | {v['gb_per_s']:.2f} |")
            L.append("")
        if self.skips:
            L += ["### Skipped", ""] + [f"- {s['bench']}/{s['contender']}: {s['reason']}" for s in self.skips] + [""]
        if self.failures:
            L += ["### Failures", ""] + [f"- {s['bench']}/{s['contender']}: {s['reason']}" for s in self.failures] + [""]
        return "\n".join(L) + "\n"

    @staticmethod
    def loadavg(res):
        la = res.get("loadavg", {})
        fmt = lambda v: ", ".join(f"{x:.1f}" for x in v)  # noqa: E731
        return fmt(la["before"]) + (f"; after: {fmt(la['after'])}" if "after" in la else "") if la else "not recorded"

    @staticmethod
    def verdict(value, goal, unit, higher=False, at=""):
        """'met' or 'missed by ...' for a figure against its goal (at most `goal`, or at least
        it with higher=True); `at` names the statistic judged."""
        what = f"{at} " if at else ""
        f = (lambda v: f"{v:.3f}x") if unit == "x" else (lambda v: f"{v:.2f} {unit}")  # noqa: E731
        ok = value >= goal if higher else value <= goal
        if ok:
            return f"met ({what}{f(value)})"
        by = goal - value if higher else value - goal
        rel = f", {by / goal * 100:.1f}%" if goal else ""
        return f"**missed** by {f(by)}{rel} ({what}{f(value)})"

    def plot(self):
        if not shutil.which("gnuplot"):
            self.skip("plot", "gnuplot", "gnuplot is not installed")
            return
        error = plot_results(self.results, os.path.join(self.out, "performance.png"), self.tmp)
        if error:
            self.skip("plot", "gnuplot", error)


def plot_results(R, png, tmp):
    """performance.png: one panel per table (throughput, keystroke latency, fairness, start);
    a panel whose benchmark did not run says so. Returns gnuplot's complaint, or None."""
    def table(name, header, rows):
        # Contender names hold spaces ("ptyvisor (CLI)"): every field is quoted.
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(" ".join(f'"{h}"' for h in header) + "\n")
            for row in rows:
                f.write(" ".join(f'"{v}"' if isinstance(v, str) else f"{v:.3f}" for v in row) + "\n")
        return path

    def columns(path, n):
        return f"plot '{path}' using 2:xtic(1)" + "".join(f", '' using {i}" for i in range(3, n + 2))

    panels = []
    if "throughput" in R:
        streams = list(R["throughput"]["streams"])
        names = []
        for s in R["throughput"]["streams"].values():
            names += [c for c in s if c not in names]
        rows = [[c] + [R["throughput"]["streams"][s].get(c, {}).get("median_mbps", 0) for s in streams] for c in names]
        panels.append(("Output throughput (MB/s, median; higher is better)", "MB/s", False,
                       columns(table("tp.dat", ["contender"] + streams, rows), len(streams)), "top right"))
    if R.get("latency"):
        rows = [[case] + [r.get(c, {}).get(p, 0) for c in ("forkpty", "ptyvisor-raw") for p in ("p50", "p99")]
                for case, r in R["latency"].items()]
        header = ["case", "forkpty p50", "forkpty p99", "ptyvisor-raw p50", "ptyvisor-raw p99"]
        panels.append(("Keystroke echo latency (us; lower is better)", "microseconds (log)", True,
                       columns(table("lat.dat", header, rows), 4), "top right"))
    if R.get("fairness", {}).get("contenders"):
        rows = [[c, v["p50_ms"], v["p99_ms"]] for c, v in R["fairness"]["contenders"].items()]
        panels.append(("Fairness: echo of a typed session under 15 floods (ms; lower is better)", "milliseconds", False,
                       columns(table("fair.dat", ["contender", "echo p50", "echo p99"], rows), 2), "top right"))
    if R.get("start"):
        names = []
        for cmd in R["start"].values():
            names += [c for c, v in cmd.items() if isinstance(v, dict) and "exit_us" in v and c not in names]
        rows = [[c] + [R["start"][cmd].get(c, {}).get("exit_us", {}).get(p, 0) / 1000
                       for cmd in R["start"] for p in ("p50", "p99")] for c in names]
        header = ["contender"] + [f"{cmd} {p}" for cmd in R["start"] for p in ("p50", "p99")]
        panels.append(("Session start to end (ms; lower is better)", "milliseconds", False,
                       columns(table("start.dat", header, rows), len(header) - 1), "top left"))
    if not panels:
        return None
    layout = "1,1" if len(panels) == 1 else "1,2" if len(panels) == 2 else "2,2"
    height = 500 if len(panels) <= 2 else 1000
    gp = [f"set terminal pngcairo size 1200,{height} font ',10' noenhanced", f"set output '{png}'",
          f"set multiplot layout {layout}", "set style data histograms", "set style histogram clustered gap 1",
          "set style fill solid 0.8 border -1", "set grid ytics", "set xtics rotate by -20"]
    for title, ylabel, log_scale, plot, key in panels:
        gp += [f"set key {key} autotitle columnheader", f"set title '{title}'", f"set ylabel '{ylabel}'",
               "set logscale y" if log_scale else "unset logscale y", "set yrange [1:*]" if log_scale else "set yrange [0:*]",
               plot]
    gp.append("unset multiplot")
    r = subprocess.run(["gnuplot"], input="\n".join(gp) + "\n", text=True, capture_output=True, timeout=60)
    return r.stderr[-300:] if r.returncode != 0 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round; under 2 minutes")
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(ALL))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build/bench"))
    ap.add_argument("--rounds", type=int, default=0, help="repetitions (default 5, 1 with --smoke)")
    ap.add_argument("--bytes", type=int, default=0, help="throughput size (default 128 MiB, 4 MiB with --smoke)")
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
    except KeyboardInterrupt:
        suite.fail("suite", "run.sh", "interrupted")
    except Failure as e:
        suite.fail("suite", "ptyvisor", str(e))
    finally:
        if suite.daemon and suite.daemon.poll() is not None:
            suite.fail("suite", "ptyvisor", f"ptyvisord exited with {suite.daemon.returncode} during the run")
        try:
            suite.write_reports(sys.argv[1:])
        finally:
            suite.stop_all()
    log(f"done in {time.time() - t0:.1f} s; results in {args.out}/results.md")
    with open(os.path.join(args.out, "results.md")) as f:
        print(f.read())
    broken = [f for f in suite.failures if f["contender"] in REQUIRED or f["bench"] in ("suite", *PERSISTENT)]
    for f in suite.failures:
        log(f"failure: {f['bench']}/{f['contender']}: {f['reason']}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
