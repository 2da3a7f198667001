"""The harness of the benchmark suite."""
import json
import os
import pwd
import select
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from .common import ROOT, ACCOUNT, log, Failure


SCREEN_WORKER = "ptyvisor-screen"


PARTS = ("ptyvisord", "ptyvisor-screen")  # a daemon's processes, in the order reports name them


def service_parts(pid):
    """A daemon's processes by part: {"ptyvisord": [pid], "ptyvisor-screen": [its children
    named ptyvisor-screen]}. The daemon keeps every session's screen in that worker, so what a
    session costs is the two together; each is measured on its own too, so that a report
    can say which of them grew. A worker restarted between two readings starts from zero: a
    difference over that window undercounts (the measurements return the workers' PIDs, so
    that a caller can refuse such a window)."""
    workers = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/comm") as f:
                    if f.read().strip() == SCREEN_WORKER[:15]:
                        workers.append(child)
            except OSError:
                pass
    return {"ptyvisord": [pid], "ptyvisor-screen": sorted(workers)}


def service_pids(pid):
    """A daemon's PID and those of its screen workers (service_parts, flattened)."""
    return [p for part in service_parts(pid).values() for p in part]


def process_counters(pids):
    """User + system CPU seconds, voluntary and involuntary context switches and schedstat
    runs, summed over every thread of `pids`. A process or thread that ended meanwhile adds
    nothing (a screen worker the daemon is restarting)."""
    tick = os.sysconf("SC_CLK_TCK")
    c = {"cpu": 0.0, "voluntary": 0, "involuntary": 0, "runs": 0}
    for p in pids:
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{p}/task/{tid}/status") as f:
                    status = f.read()
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    runs = int(f.read().split()[2])
            except OSError:
                continue
            c["cpu"] += (int(fields[11]) + int(fields[12])) / tick
            for line in status.splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    c["voluntary"] += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    c["involuntary"] += int(line.split()[1])
            c["runs"] += runs
    return c


class Harness:
    """The suite's machinery: processes run bounded and as the account, the private daemons,
    the optional contenders (ssh, systemd-run), the measurement of a daemon's process, and
    the recording of rows, failures and skips. The benchmarks are mixins over it."""

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
        self.run_record = None  # begin_run() .. end_run(): times, commit, load average

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
        # Shown as built (the suite runs a copy from its temporary directory, which is gone after).
        shown = " ".join([os.path.relpath(os.path.join(self.build, "bench/sessionbench"), ROOT), mode, "--socket", "$SOCKET"] +
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
        """The main daemon's service (service_parts): cpu seconds, voluntary+involuntary
        context switches, schedstat runs, rss and pss KiB of ptyvisord and its screen worker
        together, and of each in `parts`; the worker's PIDs; the daemon's own descriptors."""
        pid = self.daemon.pid
        parts = {}
        service = service_parts(pid)
        for part, pids in service.items():
            c = process_counters(pids)
            rss = pss = 0
            for p in pids:
                try:
                    with open(f"/proc/{p}/status") as f:
                        rss += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
                    with open(f"/proc/{p}/smaps_rollup") as f:
                        pss += next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
                except OSError:
                    if p == pid:
                        raise
                    # A screen worker that ended meanwhile: the daemon starts another.
            parts[part] = {"cpu": c["cpu"], "switches": c["voluntary"] + c["involuntary"], "runs": c["runs"],
                           "rss_kib": rss, "pss_kib": pss}
        out = {k: sum(v[k] for v in parts.values()) for k in ("cpu", "switches", "runs", "rss_kib", "pss_kib")}
        # Descriptors are the daemon's alone: wait_daemon_quiet() waits for its sessions'.
        out.update({"parts": parts, "workers": service["ptyvisor-screen"], "fds": len(os.listdir(f"/proc/{pid}/fd"))})
        return out

    def wait_daemon_quiet(self, fds, timeout=60):
        """Waits until the daemon's descriptor count is back to `fds` (sessions cleaned up)."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if self.proc_stat()["fds"] <= fds:
                return
            time.sleep(0.1)
        raise Failure(f"ptyvisord still holds {self.proc_stat()['fds']} descriptors (baseline {fds})")

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
        # The daemonised sshd writes its PID file after its parent has exited, so the file may
        # be empty or partial at first: wait until the whole line is there.
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

    # A run whose 1-minute load average, at its start or its end, is above this share of the
    # CPUs shared them with other work: every figure then includes waiting for a CPU.
    OVERLAP_SHARE = 0.5

    def begin_run(self):
        """Records the start of the run: its time (UTC), the commit measured, the load average."""
        def git(*a):
            r = subprocess.run(["git", "-C", ROOT] + list(a), capture_output=True, text=True, timeout=10)
            return r.stdout.strip() if r.returncode == 0 else ""
        self.run_record = {"start": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                           "commit": git("rev-parse", "HEAD"), "commit_short": git("rev-parse", "--short", "HEAD"),
                           "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
                           "cpus": os.cpu_count(), "loadavg": {"start": os.getloadavg()}, "load_samples": []}
        self.note_load("start")

    def note_load(self, when):
        """Samples the 1-minute load average (at the start, after each benchmark, at the end)."""
        self.run_record["load_samples"].append({"when": when, "loadavg_1m": os.getloadavg()[0]})

    def end_run(self):
        """Records the end of the run, and whether it overlapped other work: a 1-minute load
        average at its start or its end above OVERLAP_SHARE of the CPUs."""
        r = self.run_record
        self.note_load("end")
        r["end"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        r["loadavg"]["end"] = os.getloadavg()
        r["loadavg_1m"] = {"start": r["loadavg"]["start"][0], "end": r["loadavg"]["end"][0]}
        r["max_loadavg_1m"] = max(x["loadavg_1m"] for x in r["load_samples"])
        r["overlap_threshold"] = self.OVERLAP_SHARE * r["cpus"]
        worst = max(r["loadavg_1m"].values())
        r["overlapped"] = worst > r["overlap_threshold"]
        r["overlap_note"] = f"overlapped other work (load {worst:.2f})" if r["overlapped"] else ""
        r["busy"] = r["max_loadavg_1m"] > r["cpus"]
        if r["overlapped"]:
            log(f"this run {r['overlap_note']}: 1-minute load average {r['loadavg_1m']['start']:.2f} at the start, "
                f"{r['loadavg_1m']['end']:.2f} at the end, on {r['cpus']} CPUs (threshold {r['overlap_threshold']:.2f})")

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

    def failed_contenders(self, bench):
        return {f["contender"] for f in self.failures if f["bench"] == bench}

    def start_baseline_daemon(self):
        """The --baseline daemon, once, configured as this build's."""
        if self.baseline.get("daemon"):
            return
        p, cg = self.launch_daemon("-baseline", self.baseline_socket, self.baseline["ptyvisord"])
        self.baseline["daemon"] = p
        if cg:
            self.extra_cgroups.append(cg)

    MEMORY_KEYS = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmPTE", "Pss", "Pss_Anon", "Pss_Shmem")

    def daemon_memory(self, pid):
        """A daemon's memory as the kernel accounts it, ptyvisord and its screen worker
        (service_parts): VmRSS and its parts and VmPTE (page tables) from /proc/PID/status,
        Pss and its parts from /proc/PID/smaps_rollup. KEY is the two summed; "ptyvisord:KEY"
        and "ptyvisor-screen:KEY" each's own. The memfds (the output logs) of either, each
        counted once: how many, their size and the bytes allocated to them (st_blocks * 512,
        through /proc/PID/fd, which needs root). `fds` is the daemon's own descriptors;
        `worker_pids` the workers measured. KiB, but `memfds`, `fds` (counts) and the PIDs."""
        m = {f"{part}:{k}" if part else k: 0 for part in ("",) + PARTS for k in self.MEMORY_KEYS}
        memfds, fds = {}, 0
        service = service_parts(pid)
        for part, pids in service.items():
            for p in pids:
                try:
                    with open(f"/proc/{p}/status") as f:
                        for line in f:
                            k = line.split(":")[0]
                            if k in self.MEMORY_KEYS:
                                m[k] += int(line.split()[1])
                                m[f"{part}:{k}"] += int(line.split()[1])
                    with open(f"/proc/{p}/smaps_rollup") as f:
                        for line in f:
                            k = line.split(":")[0]
                            if k in ("Pss", "Pss_Anon", "Pss_Shmem"):
                                m[k] += int(line.split()[1])
                                m[f"{part}:{k}"] += int(line.split()[1])
                    for fd in os.listdir(f"/proc/{p}/fd"):
                        fds += p == pid
                        try:
                            if not os.readlink(f"/proc/{p}/fd/{fd}").startswith("/memfd:"):
                                continue
                            st = os.stat(f"/proc/{p}/fd/{fd}")
                        except OSError:  # closed meanwhile
                            continue
                        memfds[(st.st_dev, st.st_ino)] = st
                except OSError:
                    if p == pid:
                        raise
                    # A screen worker that ended meanwhile: the daemon starts another.
        m.update({"memfds": len(memfds), "memfd_size": sum(st.st_size for st in memfds.values()) // 1024,
                  "memfd_allocated": sum(st.st_blocks * 512 for st in memfds.values()) // 1024, "fds": fds,
                  "worker_pids": service["ptyvisor-screen"]})
        return m

    @staticmethod
    def memory_totals(m):
        """Each page once, in KiB: a process's RSS without the output-log pages it maps
        (RssShmem), plus its page tables; the output logs' memfd allocation once, with the
        daemon that owns them. Returns {"ptyvisord": .., "ptyvisor-screen": .., "both": ..}."""
        t = {part: m[f"{part}:VmRSS"] - m[f"{part}:RssShmem"] + m[f"{part}:VmPTE"] for part in PARTS}
        t["ptyvisord"] += m["memfd_allocated"]
        t["both"] = sum(t[part] for part in PARTS)
        return t

    @staticmethod
    def cpu_seconds(pid):
        """User + system CPU seconds of a daemon and its screen worker, all their threads
        (10 ms ticks)."""
        return sum(Harness.cpu_parts(pid).values())

    @staticmethod
    def cpu_parts(pid):
        """User + system CPU seconds of each part of a daemon (service_parts)."""
        return {part: process_counters(pids)["cpu"] for part, pids in service_parts(pid).items()}

    @staticmethod
    def context_switches(pid):
        """{part: (voluntary, involuntary, cpu seconds)}, summed over each part's threads."""
        out = {}
        for part, pids in service_parts(pid).items():
            c = process_counters(pids)
            out[part] = (c["voluntary"], c["involuntary"], c["cpu"])
        return out

    def wakeups(self, pid, window):
        """A daemon's context switches and CPU over `window` seconds idle: the two parts
        summed at the top level (what the goal judges), each part in `parts`, and the workers'
        PIDs at both ends (`worker_pids`: a restart in the window makes it undercount)."""
        w0 = service_parts(pid)["ptyvisor-screen"]
        a = self.context_switches(pid)
        time.sleep(window)
        b = self.context_switches(pid)
        w1 = service_parts(pid)["ptyvisor-screen"]
        parts = {}
        for part in PARTS:
            vol, inv, cpu = (b[part][i] - a[part][i] for i in range(3))
            parts[part] = {"voluntary": vol, "involuntary": inv, "voluntary_per_s": vol / window,
                           "involuntary_per_s": inv / window, "cpu_s": cpu}
        vol = sum(v["voluntary"] for v in parts.values())
        inv = sum(v["involuntary"] for v in parts.values())
        return {"voluntary_per_s": vol / window, "involuntary_per_s": inv / window, "voluntary": vol, "involuntary": inv,
                "cpu_s": sum(v["cpu_s"] for v in parts.values()), "window_s": window, "parts": parts,
                "worker_pids": [w0, w1]}
