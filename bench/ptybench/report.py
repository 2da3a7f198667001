"""The reports: DIR/results.json, results.csv and results.md."""
import csv
import json
import os
import platform
import subprocess
import time

from .common import ROOT, GOAL_REPLAY_MS, GOAL_OBSERVER_RATIO, GOAL_IDLE_KIB, GOAL_LIST_MS, OBSERVERS


class Report:
    """write_reports() and the markdown of results.md."""

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
               "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "run": self.run_record}
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
        L += self.run_lines(doc.get("run"))
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
            L += ["### Memory and idle wake-ups of ptyvisord and its screen worker", "",
                  "The daemon is two processes: ptyvisord and its screen worker (ptyvisor-screen, which keeps every "
                  "session's screen). Each is given on its own, then both: RSS and PSS from /proc/PID/status and "
                  "smaps_rollup, wake-ups (voluntary + involuntary context switches of every thread) per second over "
                  f"{mm['window_s']:.0f} s of idling. Descriptors are the daemon's own.", "",
                  "| idle sessions | RSS KiB: ptyvisord / ptyvisor-screen / both | RSS per session KiB: ptyvisord / "
                  "ptyvisor-screen / both | PSS per session KiB: ptyvisord / ptyvisor-screen | fds per session | "
                  "wake-ups/s: ptyvisord / ptyvisor-screen / both |", "| --- | --- | --- | --- | --- | --- |"]

            def parts(v, key, fmt):
                p = v.get("parts", {})
                return " / ".join(format(p[x][key], fmt) if x in p else "n/a" for x in ("ptyvisord", "ptyvisor-screen"))
            i = mm["idle"]
            L.append(f"| 0 | {parts(i, 'rss_kib', 'd')} / {i['rss_kib']} | – | – | – | "
                     f"{parts(i, 'wakeups_per_s', '.1f')} / {i['wakeups_per_s']:.1f} |")
            notes = []
            for k, v in mm["sessions"].items():
                L.append(f"| {k} | {parts(v, 'rss_kib', 'd')} / {v['rss_kib']} | {parts(v, 'rss_per_session_kib', '.1f')} / "
                         f"{v['per_session_kib']:.1f} | {parts(v, 'pss_per_session_kib', '.1f')} | {v['fds_per_session']:.1f} | "
                         f"{parts(v, 'wakeups_per_s', '.1f')} / {v['wakeups_per_s']:.1f} |")
                if v.get("note"):
                    notes.append(f"{k} sessions: {v['note']}.")
            ap = mm["after"].get("parts", {})
            L += ["", f"RSS after the sessions ended: {mm['after']['rss_kib']} KiB"
                  + (" (" + ", ".join(f"{part} {v}" for part, v in ap.items()) + ")" if ap else "") + "."
                  + "".join(" " + n for n in notes), ""]
        persistent = [n for n in ("idle-sessions", "replay", "observers") if n in R]
        if persistent:
            stamp = lambda name: (f"Commit {m['git']}" + (" (with uncommitted changes)" if m.get("dirty") else "")  # noqa: E731
                                  + f"; this run: `{doc['command']}`; this table alone: `bench/run.sh --only {name}"
                                  + (" --smoke" if doc["smoke"] else "") + "`.")
            goals = []
            tot_text = lambda tp: (f"{tp['both']:.2f} KiB in all: ptyvisord {tp['ptyvisord']:.2f}, "  # noqa: E731
                                   f"ptyvisor-screen {tp['ptyvisor-screen']:.2f}")
        if "idle-sessions" in R:
            s = R["idle-sessions"]
            k, b, a, per = s["sessions"], s["before"], s["after"], s["per_session_kib"]
            tp = s["total_per_session_kib_parts"]
            L += [f"### Persistent sessions: {k} idle detached sessions", "", stamp("idle-sessions"), "",
                  f"`cat` in {k} detached sessions, no client attached, started 4 at a time (`{s['commands']['start']}`, "
                  "as the account), on a fresh daemon of their own (same configuration, one session run and ended "
                  "first), so that no earlier benchmark's freed heap hides what they take. The daemon is two processes, "
                  "ptyvisord and its screen worker (ptyvisor-screen, one per daemon, which keeps every session's screen): "
                  "each is measured on its own, and the goal judges the two together (the same worker, not restarted, "
                  "at every reading). Their memory was read before "
                  f"the first START and 1 s after the last STARTED; per session is the difference divided by {k}. KiB "
                  f"throughout. Load average (1, 5, 15 min) before: {self.loadavg(s)}.", "",
                  "| measure | before: ptyvisord / ptyvisor-screen | with the sessions: ptyvisord / ptyvisor-screen | "
                  "per session: ptyvisord | per session: ptyvisor-screen | per session: both |",
                  "| --- | --- | --- | --- | --- | --- |"]
            for key, name in (("VmRSS", "RSS (`VmRSS`, /proc/PID/status)"), ("RssAnon", "of which anonymous (`RssAnon`)"),
                              ("RssShmem", "of which output-log pages mapped and touched (`RssShmem`)"),
                              ("Pss", "PSS (`Pss`, /proc/PID/smaps_rollup)"),
                              ("VmPTE", "page tables (`VmPTE`; kernel memory, not in RSS)")):
                d, w = f"ptyvisord:{key}", f"ptyvisor-screen:{key}"
                L.append(f"| {name} | {b[d]} / {b[w]} | {a[d]} / {a[w]} | {per[d]:.2f} | {per[w]:.2f} | {per[key]:.2f} |")
            for key, name in (("memfd_allocated", "output logs: memfd bytes allocated (`st_blocks` × 512), counted once"),
                              ("memfd_size", "output logs: memfd size (`st_size`; pages are allocated when written)"),
                              ("memfds", "output logs: memfds (count)"), ("fds", "descriptors of ptyvisord (count)")):
                L.append(f"| {name} | {b[key]} | {a[key]} | {per[key]:.2f} | | |")
            L.append("| **total: RSS − RssShmem + page tables, each process; memfd allocated once, with ptyvisord** "
                     f"(each page once) | | | **{tp['ptyvisord']:.2f}** | **{tp['ptyvisor-screen']:.2f}** | "
                     f"**{tp['both']:.2f}** |")
            w0, w = s["wakeups_0"], s["wakeups"]
            lj = s["list"]
            lu = lj["us"]

            def idle_line(x):
                return "; ".join(f"{part} {v['voluntary_per_s']:.1f}/s voluntary, {v['involuntary_per_s']:.1f}/s involuntary, "
                                 f"{v['cpu_s'] * 1000:.0f} ms of CPU" for part, v in x["parts"].items())
            cpu_parts = lj.get("cpu_ms_per_list", {})
            L += ["", "Other kernel memory that each session costs (its terminal pair, socket buffers, pidfd, cgroup, the "
                  "memfd's mapping, and the session's own processes) is in none of these figures. "
                  f"After the LISTs below, RSS was {s['after_list']['VmRSS']} KiB in all (ptyvisord "
                  f"{s['after_list']['ptyvisord:VmRSS']}, anonymous {s['after_list']['ptyvisord:RssAnon']}; ptyvisor-screen "
                  f"{s['after_list']['ptyvisor-screen:VmRSS']}): memory that the LIST replies used and the allocator kept.", "",
                  f"Wake-ups: the change in context switches of all the threads of each process (/proc/PID/task/*/status), "
                  f"and its CPU time, over {w['window_s']:.0f} s: with 0 sessions {idle_line(w0)}; with {k} idle sessions "
                  f"{idle_line(w)}. Both together with {k} sessions: {w['voluntary']} voluntary and {w['involuntary']} "
                  f"involuntary in the window, {w['voluntary_per_s'] / k:.4f}/s per session.", "",
                  f"LIST with {k} sessions: {lu['n']} LISTs one after another (after untimed warm-ups), each timed from the "
                  "send() of LIST, on a connection already made, to the arrival of the whole SESSIONS frame "
                  f"({lj['payload_bytes']} bytes). Nearest-rank p50 {lu['p50'] / 1000:.2f} ms, p99 {lu['p99'] / 1000:.2f} ms, "
                  f"max {lu['max'] / 1000:.2f} ms. CPU time (user + system, /proc/PID/stat, 10 ms ticks) over all "
                  f"{lu['n']} LISTs and the warm-ups, per LIST: {lj['daemon_cpu_ms_per_list']:.2f} ms in all"
                  + (" (" + ", ".join(f"{part} {v:.2f}" for part, v in cpu_parts.items()) + ")" if cpu_parts else "")
                  + f" (± {10 / lj['requests']:.2f} ms: one tick over them all). "
                  f"The reply named **{lj['listed']} of the {k}** sessions (`{s['commands']['list']}`).", ""]
            fl = s.get("first_list")
            if fl:
                L += [f"The first LIST, timed alone before those (`{s['commands']['first_list']}`): "
                      f"{fl['us']['max'] / 1000:.2f} ms, with "
                      + ", ".join(f"{part} {v:.0f} ms" for part, v in fl["cpu_ms"].items())
                      + f" of CPU; it named {fl['listed']} of the {k} sessions.", ""]
            worst_list = max(lu["p99"], fl["us"]["max"] if fl else 0) / 1000
            list_verdict = self.verdict(worst_list, GOAL_LIST_MS, "ms", at="the longer of the first LIST and p99:")
            if lj["listed"] != k:
                # A reply that leaves sessions out is not a LIST of k sessions, however fast.
                list_verdict = (f"**not met**: {k - lj['listed']} of the {k} sessions missing from the reply "
                                f"(timing: {list_verdict})")
            goals += [(f"memory per idle session ≤ {GOAL_IDLE_KIB:.0f} KiB ({k} sessions), ptyvisord and ptyvisor-screen",
                       f"{tot_text(tp)} (PSS ptyvisord {per['ptyvisord:Pss']:.2f}, ptyvisor-screen "
                       f"{per['ptyvisor-screen:Pss']:.2f}; memfd allocated {per['memfd_allocated']:.2f}; page tables "
                       f"{per['VmPTE']:.2f})", self.verdict(tp["both"], GOAL_IDLE_KIB, "KiB")),
                      (f"0 wake-ups/s with {k} idle sessions, ptyvisord and ptyvisor-screen",
                       " + ".join(f"{part} {v['voluntary_per_s']:.1f}/s" for part, v in w["parts"].items())
                       + " voluntary context switches",
                       self.verdict(w["voluntary_per_s"], 0, "/s")),
                      (f"LIST ≤ {GOAL_LIST_MS:.0f} ms with {k} sessions",
                       (f"first LIST {fl['us']['max'] / 1000:.2f} ms; then " if fl else "")
                       + f"p50 {lu['p50'] / 1000:.2f} ms, p99 {lu['p99'] / 1000:.2f} ms; {lj['listed']} of {k} listed",
                       list_verdict)]
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
                  "median over runs of the user + system time of ptyvisord and its screen worker (/proc/PID/stat, 10 ms "
                  "ticks) from the start to "
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
                L.append(f"- CPU (user+sys, the daemon and its screen worker) per GB: {R['cpu']['cpu_s_per_gb']:.3f} s ({R['cpu']['bytes'] >> 20} MiB of zeros)")
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
    def run_lines(run):
        """The run's record: when (UTC), which commit, the load average at the start and the
        end; "overlapped other work (load X)" when the 1-minute figure at either was above
        half the CPUs, and a stronger warning when a sample passed the core count, since
        every figure then includes waiting for a CPU."""
        if not run or "end" not in run:
            return []
        fmt = lambda v: ", ".join(f"{x:.2f}" for x in v)  # noqa: E731
        L = [f"Run: {run['start']} to {run['end']}, commit {run['commit'] or 'unknown'}"
             + (" (with uncommitted changes)" if run["dirty"] else "")
             + f"; load average (1, 5, 15 min) at the start {fmt(run['loadavg']['start'])}, at the end "
             f"{fmt(run['loadavg']['end'])}; highest 1-minute figure sampled (start, after each benchmark, end) "
             f"{run['max_loadavg_1m']:.2f} on {run['cpus']} cores.", ""]
        if run.get("overlapped"):
            L += [f"**This run {run['overlap_note']}**: the 1-minute load average was "
                  f"{run['loadavg_1m']['start']:.2f} at its start and {run['loadavg_1m']['end']:.2f} at its end, above "
                  f"{run['overlap_threshold']:.2f} (half of its {run['cpus']} CPUs): other processes shared the CPUs.", ""]
        if run["busy"]:
            L += [f"**The machine was busy during this run**: its load average reached {run['max_loadavg_1m']:.2f}, "
                  f"above its {run['cpus']} cores, so the figures include time spent waiting for a CPU; compare them "
                  "with a run on a quiet machine before drawing conclusions.", ""]
        return L

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
