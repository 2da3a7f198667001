"""Fairness: the echo latency of one typed session while 15 others flood output, through each contender."""
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from ..common import FLOODS, TYPED, log, Failure


class Fairness:
    """bench_fairness and its contenders."""

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
