"""Output throughput of one session (every contender) and aggregate throughput of many busy sessions."""
import os
import statistics

from ..common import TEXT_LINE, log, Failure


class Throughput:
    """bench_throughput and bench_scale."""

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
