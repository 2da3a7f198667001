"""Keystroke echo latency: forkpty against ptyvisor-raw."""
import json
import statistics

from ..common import log, Failure


class Latency:
    """bench_latency."""

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
