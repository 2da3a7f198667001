"""The daemon's cost per byte relayed (CPU, system calls) and the protocol micro-benchmarks."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import time

from ..common import log, Failure


class Cost:
    """bench_cpu, bench_syscalls and bench_micro."""

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
                               "note": "user+sys of the daemon and its screen worker from /proc/PID/stat, 10 ms ticks"}
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
