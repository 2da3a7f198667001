"""DIR/performance.png, drawn by gnuplot."""
import os
import shutil
import subprocess



class Plot:
    """plot(): DIR/performance.png."""

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
