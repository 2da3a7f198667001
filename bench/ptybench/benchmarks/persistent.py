"""The persistent-session benchmarks (protocol version 2): idle sessions, replay, observers."""
import json
import os
import signal
import statistics
import subprocess
import time

from ..common import ROOT, OBSERVERS, log, Failure


# What each "shown" session prints before it idles: a title and more lines than an 80x24
# screen holds (so some scroll off), then it waits in `cat`.
SHOWN_LINES = 40
SHOWN = f"printf '\\033]2;idle\\007'; seq 1 {SHOWN_LINES}; exec cat"
QUIET_S = 5.0  # screen::Worker::kQuietPeriod


class Persistent:
    """bench_idle_sessions, bench_replay and bench_observers."""

    def bench_idle_sessions(self):
        """K detached idle sessions (`cat`) on a fresh daemon of their own: its memory per
        session, its wake-ups while they idle, and LIST latency with all of them listed.
        Then K more that each print a screenful and a title before they idle (`SHOWN`): their
        memory just after they printed, and after the screen worker's quiet period
        (src/screen/worker.h: an idle session's emulator is given back and rebuilt from the
        log on demand), and one's screen read back afterwards, which must show what it printed."""
        k = self.args.idle_sessions or (50 if self.smoke else 1000)
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
            # The first LIST on its own, timed: it may cost what later ones answer from a cache
            # (each session's input probe, input_watch.h), and the warm-ups below would hide it.
            c0 = self.cpu_parts(pid)
            fj, out["commands"]["first_list"] = self.sessionbench("list", ["--count", 1, "--warmup", 0, "--expect", k],
                                                                  timeout=300, sock=sock)
            c1 = self.cpu_parts(pid)
            fj["cpu_ms"] = {part: (c1[part] - c0[part]) * 1000 for part in c0}
            out["first_list"] = fj
            c0 = self.cpu_parts(pid)
            lj, out["commands"]["list"] = self.sessionbench("list", ["--count", lists, "--warmup", warm, "--expect", k],
                                                            timeout=120, sock=sock)
            c1 = self.cpu_parts(pid)
            lj["cpu_ms_per_list"] = {part: (c1[part] - c0[part]) * 1000 / (lists + warm) for part in c0}
            lj["daemon_cpu_ms_per_list"] = sum(lj["cpu_ms_per_list"].values())  # both parts, as before
            lj["requests"] = lists + warm
            after_list = self.daemon_memory(pid)
            # Then sessions that showed something (after LIST, which is timed with K sessions):
            # their emulators exist until the quiet period. Measured from after_list.
            sj, out["commands"]["start_shown"] = self.sessionbench(
                "idle-start", ["--sessions", k, "--window", 4, "--", "sh", "-c", SHOWN], timeout=300, sock=sock)
            if len(set(sj["ids"])) != k:
                raise Failure(f"idle-start reported {len(set(sj['ids']))} distinct shown sessions, {k} asked for")
            ids += sj["ids"]
            time.sleep(1.0)
            shown = self.daemon_memory(pid)
            time.sleep(QUIET_S + 2.0)  # the quiet period, a sweep (a quarter of it) and a margin
            quiet = self.daemon_memory(pid)
            idle_quiet = self.wakeups(pid, window)
            # One screen read back after its emulator was given back: rebuilt from the log.
            _, p = self.run([self.bin["ptyvisor"], "screen", "--socket", sock, "--json", sj["ids"][-1]], 60,
                            account=True)
            screen = json.loads(p.stdout.decode())
            out["shown_screen"] = {"title": screen.get("title"), "last_line": (screen.get("lines") or [""])[-2]}
            if screen.get("title") != "idle" or screen.get("lines", [""])[-2] != str(SHOWN_LINES):
                raise Failure(f"a shown session's screen after its quiet period is not what it printed: {screen}")
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
        # The screen worker is half of what a session costs: a window in which it was missing,
        # or restarted (a new one starts from zero), would leave its share out.
        seen = [before["worker_pids"], after["worker_pids"], *idle0["worker_pids"], *idle["worker_pids"],
                shown["worker_pids"], quiet["worker_pids"], *idle_quiet["worker_pids"]]
        if not before["worker_pids"] or any(w != before["worker_pids"] for w in seen):
            raise Failure(f"the screen worker was missing or restarted during the measurement (PIDs {seen}): "
                          "its share of the per-session cost would be left out")
        per = {key: (after[key] - before[key]) / k for key in before if key != "worker_pids"}
        # RSS counts the memfd pages a process has mapped and touched (RssShmem) too; the
        # totals count each page once (memory_totals).
        t0, t1 = self.memory_totals(before), self.memory_totals(after)
        tot_parts = {part: (t1[part] - t0[part]) / k for part in t0}
        tot = tot_parts["both"]
        t1l, t2, t3 = self.memory_totals(after_list), self.memory_totals(shown), self.memory_totals(quiet)
        shown_parts = {part: (t2[part] - t1l[part]) / k for part in t1l}
        quiet_parts = {part: (t3[part] - t1l[part]) / k for part in t1l}
        out.update({"shown": shown, "quiet": quiet, "wakeups_quiet": idle_quiet,
                    "shown_total_per_session_kib_parts": shown_parts, "quiet_total_per_session_kib_parts": quiet_parts})
        out.update({"before": before, "after": after, "after_list": after_list, "per_session_kib": per,
                    "total_per_session_kib": tot, "total_per_session_kib_parts": tot_parts,
                    "wakeups_0": idle0, "wakeups": idle, "list": lj, "kill_s": kj["seconds"]})
        self.results["idle-sessions"] = out
        case = f"{k} detached idle sessions"
        for prefix, who in (("", "ptyvisord + ptyvisor-screen"), ("ptyvisord:", "ptyvisord"),
                            ("ptyvisor-screen:", "ptyvisor-screen")):
            for key, name in (("VmRSS", "RSS"), ("Pss", "PSS"), ("VmPTE", "page tables")):
                self.row("idle-sessions", case, who, f"{name} per session", round(per[prefix + key], 2), "KiB")
        self.row("idle-sessions", case, "ptyvisord", "memfd allocated per session", round(per["memfd_allocated"], 2), "KiB")
        for part, who in (("both", "ptyvisord + ptyvisor-screen"), ("ptyvisord", "ptyvisord"),
                          ("ptyvisor-screen", "ptyvisor-screen")):
            self.row("idle-sessions", case, who, "total per session", round(tot_parts[part], 2), "KiB")
        for parts, when in ((shown_parts, "1 s after printing"), (quiet_parts, f"{QUIET_S + 2:.0f} s later")):
            for part, who in (("both", "ptyvisord + ptyvisor-screen"), ("ptyvisord", "ptyvisord"),
                              ("ptyvisor-screen", "ptyvisor-screen")):
                self.row("idle-sessions", f"{k} sessions that printed a screen, {when}", who, "total per session",
                         round(parts[part], 2), "KiB")
        self.row("idle-sessions", case, "ptyvisord + ptyvisor-screen", "voluntary switches", idle["voluntary_per_s"], "1/s")
        for part, v in idle["parts"].items():
            self.row("idle-sessions", case, part, "voluntary switches", v["voluntary_per_s"], "1/s")
            self.row("idle-sessions", case, part, "CPU while idle", round(v["cpu_s"] / idle["window_s"] * 1000, 2), "ms/s")
        self.row("idle-sessions", case, "sessionbench", "first LIST", round(fj["us"]["max"] / 1000, 3), "ms")
        self.row("idle-sessions", case, "sessionbench", "LIST p50", round(lj["us"]["p50"] / 1000, 3), "ms")
        self.row("idle-sessions", case, "sessionbench", "LIST p99", round(lj["us"]["p99"] / 1000, 3), "ms")
        log(f"idle-sessions, per session (KiB): ptyvisord {tot_parts['ptyvisord']:.2f}, ptyvisor-screen "
            f"{tot_parts['ptyvisor-screen']:.2f}, both {tot:.2f}; PSS ptyvisord {per['ptyvisord:Pss']:.2f}, "
            f"ptyvisor-screen {per['ptyvisor-screen:Pss']:.2f}; wake-ups/s over {window:.0f} s with {k} sessions: "
            + ", ".join(f"{part} {v['voluntary_per_s']:.1f} voluntary, {v['involuntary_per_s']:.1f} involuntary, "
                        f"{v['cpu_s'] * 1000:.0f} ms CPU" for part, v in idle["parts"].items()))
        log(f"idle-sessions, {k} sessions that printed a screen, per session (KiB), 1 s after: "
            + ", ".join(f"{part} {v:.2f}" for part, v in shown_parts.items())
            + f"; {QUIET_S + 2:.0f} s later: " + ", ".join(f"{part} {v:.2f}" for part, v in quiet_parts.items())
            + f"; wake-ups then: " + ", ".join(f"{part} {v['voluntary_per_s']:.1f}/s"
                                              for part, v in idle_quiet["parts"].items()))
        log(f"idle-sessions: {json.dumps({'per_session_kib': per, 'total': tot_parts, 'wakeups': idle, 'list': lj})}")

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
                        commands[c] = (os.path.relpath(os.path.join(self.build, "bench/termbench"), ROOT) + " throughput --via pty --timeout 600 -- "
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
