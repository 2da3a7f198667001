"""Session start: first output and session end, per contender."""
import json
import statistics

from ..common import log, Failure


class Start:
    """bench_start."""

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
