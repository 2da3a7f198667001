"""Memory per idle session and the idle daemon's wake-ups."""
import json
import subprocess
import time

from ..common import log, Failure


class Memory:
    """bench_memory."""

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
                        "wakeups_per_s": (idle2["switches"] - idle["switches"]) / window,
                        "parts": self.part_figures(idle, idle2, idle2, 1, window)},
               "sessions": {}, "window_s": window}
        self.row("memory", "idle", "ptyvisord + ptyvisor-screen", "rss", idle2["rss_kib"], "KiB")
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
                 "runs_per_s": (b["runs"] - a["runs"]) / window, "cpu_s": b["cpu"] - a["cpu"],
                 # Each process on its own: the worker's share is per-session cost too.
                 "parts": self.part_figures(a, b, idle2, k, window)}
            if a["workers"] != b["workers"] or not b["workers"]:
                r["note"] = f"the screen worker was missing or restarted in the window ({a['workers']} -> {b['workers']})"
            out["sessions"][str(k)] = r
            self.row("memory", f"{k} idle sessions", "ptyvisord + ptyvisor-screen", "rss per session", round(per, 1), "KiB")
            self.row("idle", f"{k} idle sessions", "ptyvisord + ptyvisor-screen", "wake-ups", r["wakeups_per_s"], "1/s")
            log(f"memory {k}: {json.dumps(r)}")
            for part, v in r["parts"].items():
                self.row("memory", f"{k} idle sessions", part, "rss per session", round(v["rss_per_session_kib"], 1), "KiB")
                self.row("idle", f"{k} idle sessions", part, "wake-ups", v["wakeups_per_s"], "1/s")
        after = self.proc_stat()
        out["after"] = {"rss_kib": after["rss_kib"], "fds": after["fds"],
                        "parts": {part: v["rss_kib"] for part, v in after["parts"].items()}}
        self.results["memory"] = out

    @staticmethod
    def part_figures(a, b, idle, k, window):
        """Per part of the daemon (proc_stat's `parts`): RSS and PSS at b, per session against
        the idle daemon's, and wake-ups and CPU over the window a..b."""
        return {part: {"rss_kib": v["rss_kib"], "pss_kib": v["pss_kib"],
                       "rss_per_session_kib": (v["rss_kib"] - idle["parts"][part]["rss_kib"]) / k,
                       "pss_per_session_kib": (v["pss_kib"] - idle["parts"][part]["pss_kib"]) / k,
                       "wakeups_per_s": (v["switches"] - a["parts"][part]["switches"]) / window,
                       "cpu_s": v["cpu"] - a["parts"][part]["cpu"]}
                for part, v in b["parts"].items()}

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
