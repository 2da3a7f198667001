// Session start and throughput from this runtime (Node or Bun) with the ptyvisor package,
// against the C++ client ($PTYVISOR_BIN run -- ...) in the same run, printed as ratios.
// Run under scripts/with-daemon.sh (it sets PTYVISOR_SOCKET and PTYVISOR_BIN):
//   scripts/with-daemon.sh --build BUILD -- node bench/client_bench.mjs [--starts N] [--mib M] [--rounds R]
//     [--baseline DIR]
// --baseline DIR: also measures another build of the package (DIR holds its package.json and
// dist/, e.g. an unpacked `npm pack` of an older commit), interleaved with this one and the C++
// client, so that a change is judged against the same load on the machine.
//
// The machine this runs on is shared, and its load changes by the second: every run of the
// package is paired with a C++ run just before it (see interleaved()), the figures are medians,
// and each ratio is the median of the pairs' ratios.
import { spawn as spawnProcess } from "node:child_process";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Client } from "ptyvisor";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const STARTS = Number(option("--starts", 100));
const MIB = Number(option("--mib", 64));
const ROUNDS = Number(option("--rounds", 7));
const baselineDir = option("--baseline", null);
const runtime = globalThis.Bun ? `bun ${Bun.version}` : `node ${process.versions.node}`;
const cli = process.env.PTYVISOR_BIN;
if (!cli) throw new Error("PTYVISOR_BIN is not set: run under scripts/with-daemon.sh");

const now = () => Number(process.hrtime.bigint()) / 1e6; // ms

function percentile(samples, p) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
const median = (samples) => percentile(samples, 50);

/** Runs a process to its end, output discarded; resolves with its exit code. */
function runProcess(argv) {
  return new Promise((resolve, reject) => {
    const child = spawnProcess(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "inherit"] });
    child.on("error", reject);
    child.on("exit", (code) => resolve(code));
  });
}

/** Runs a process to its end; resolves with the ms to its first byte on stdout, and to its exit. */
function runTimed(argv) {
  return new Promise((resolve, reject) => {
    const t0 = now();
    let firstOutput = NaN;
    const child = spawnProcess(argv[0], argv.slice(1), { stdio: ["ignore", "pipe", "inherit"] });
    child.stdout.on("data", () => {
      if (Number.isNaN(firstOutput)) firstOutput = now() - t0;
    });
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve({ firstOutput, exit: now() - t0 }) : reject(new Error(`${argv.join(" ")} exited ${code}`))));
  });
}

/** One client under test: this package, or the baseline build. */
function packageClient(name, ClientClass) {
  const client = new ClientClass();
  return {
    name,
    /** Open a session for `echo ready`: ms to its first output and to its EXIT. */
    async start() {
      const t0 = now();
      let firstOutput = NaN;
      const session = await client.open(["echo", "ready"]);
      session.on("data", () => {
        if (Number.isNaN(firstOutput)) firstOutput = now() - t0;
      });
      const exit = await session.exited;
      if (exit.code !== 0) throw new Error(`echo exited ${JSON.stringify(exit)}`);
      return { firstOutput, exit: now() - t0 };
    },
    /** Throughput of `head -c BYTES /dev/zero`, and this process's CPU time during it. */
    async throughput(bytes) {
      const cpu0 = process.cpuUsage();
      const t0 = now();
      const session = await client.open(["head", "-c", String(bytes), "/dev/zero"]);
      let got = 0;
      session.on("data", (chunk) => (got += chunk.length));
      await session.exited;
      if (got !== bytes) throw new Error(`received ${got} of ${bytes} bytes`);
      const rate = bytes / 1048576 / ((now() - t0) / 1000);
      const cpu = process.cpuUsage(cpu0);
      return { rate, cpuMs: (cpu.user + cpu.system) / 1000 };
    },
  };
}

/** Seconds in the form `times` prints them: 0m0.123s. */
function shellSeconds(text) {
  const m = /(\d+)m([\d.]+)s/.exec(text);
  return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
}

const cpp = {
  name: "C++",
  /** `ptyvisor run -- echo ready`: the whole round trip of a short command, exec of the CLI included. */
  start: () => runTimed([cli, "run", "--", "echo", "ready"]),
  /** Throughput, and the CLI's CPU time (user + system, from the shell's `times`). */
  async throughput(bytes) {
    const script = '"$0" run -- head -c "$1" /dev/zero > /dev/null || exit 1; times';
    const t0 = now();
    const out = await new Promise((resolve, reject) => {
      const child = spawnProcess("/bin/sh", ["-c", script, cli, String(bytes)], { stdio: ["ignore", "pipe", "inherit"] });
      let text = "";
      child.stdout.on("data", (d) => (text += d));
      child.on("error", reject);
      child.on("exit", (code) => (code === 0 ? resolve(text) : reject(new Error(`ptyvisor run -- head exited ${code}`))));
    });
    const rate = bytes / 1048576 / ((now() - t0) / 1000);
    const children = out.trim().split("\n")[1] ?? "";
    const [user, system] = children.trim().split(/\s+/).map(shellSeconds);
    return { rate, cpuMs: (user + system) * 1000 };
  },
};

const clients = [cpp, packageClient(runtime, Client)];
if (baselineDir) {
  const dir = path.resolve(baselineDir);
  const { Client: BaselineClient } = await import(pathToFileURL(path.join(dir, "dist/index.js")).href);
  clients.push(packageClient(`${runtime} baseline`, BaselineClient));
}

/**
 * Runs `measure` `rounds` times for every build of the package, each run right after a run of
 * the C++ client (C++, A, C++, B; then C++, B, C++, A, ...): every package run has a C++ run as
 * its neighbour to be divided by, and the same kind of run before it. Caution with --baseline:
 * two builds in one process share its heap and allocator, and an A/A run (the same build twice)
 * still gave 314 vs 240 ms of CPU for 64 MiB; to compare builds' CPU, run the benchmark once
 * per build, alternating processes (A B A B ...), and compare their ratios to C++.
 * Returns, per package build, its results and those of the C++ runs paired with them.
 */
async function interleaved(rounds, measure) {
  const packages = clients.slice(1);
  const results = packages.map(() => ({ mine: [], cpp: [] }));
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < packages.length; k++) {
      const index = (round + k) % packages.length;
      results[index].cpp.push(await measure(cpp));
      results[index].mine.push(await measure(packages[index]));
    }
  }
  return results;
}

const fmt = (x) => x.toFixed(2);
/** Median over rounds of (this client's figure / C++'s figure in the same round). */
const ratio = (mine, theirs, key) => median(mine.map((r, i) => r[key] / theirs[i][key]));

console.log(`ptyvisor client benchmark: ${runtime}, ${STARTS} starts, ${ROUNDS} x ${MIB} MiB${baselineDir ? `, baseline ${baselineDir}` : ""}`);

/** A helper process per START (the other way to pass the fd) would cost at least a spawn. */
const helper = [];
for (const c of clients) await c.start(); // warm-up
const starts = await interleaved(STARTS, async (c) => {
  if (c === cpp) {
    const t0 = now();
    await runProcess(["/bin/true"]);
    helper.push(now() - t0);
  }
  return c.start();
});
const cppStarts = starts.flatMap((r) => r.cpp);
const pkgs = clients.slice(1);
for (const [key, what] of [["exit", "start (run `echo ready` to its exit)"], ["firstOutput", "start to first output"]]) {
  const figures = (runs) => `p50 ${fmt(percentile(runs.map((r) => r[key]), 50))} p99 ${fmt(percentile(runs.map((r) => r[key]), 99))}`;
  console.log(`${what}, ms: C++ ${figures(cppStarts)} | ${pkgs.map((c, i) => `${c.name} ${figures(starts[i].mine)}`).join(" | ")}`);
  for (let i = 0; i < pkgs.length; i++) {
    const p = (n) => fmt(percentile(starts[i].mine.map((r) => r[key]), n) / percentile(starts[i].cpp.map((r) => r[key]), n));
    console.log(`  ratio ${pkgs[i].name} / C++ (goal <= 1.5): p50 ${p(50)} p99 ${p(99)}`);
  }
}
console.log(`a helper process per START would add: p50 ${fmt(percentile(helper, 50))} ms, p99 ${fmt(percentile(helper, 99))} ms (spawn of /bin/true from ${runtime})`);

const bytes = MIB * 1048576;
await cpp.throughput(1048576); // warm-up
const runs = await interleaved(ROUNDS, (c) => c.throughput(bytes));
const cppRuns = runs.flatMap((r) => r.cpp);
const rates = (list) => `${fmt(median(list.map((r) => r.rate)))}; ${fmt(Math.max(...list.map((r) => r.rate)))}`;
console.log(`throughput, MiB/s (median; best): C++ ${rates(cppRuns)} | ${pkgs.map((c, i) => `${c.name} ${rates(runs[i].mine)}`).join(" | ")}`);
for (let i = 0; i < pkgs.length; i++) {
  console.log(`  throughput ratio ${pkgs[i].name} / C++ (goal >= 0.8): ${fmt(ratio(runs[i].mine, runs[i].cpp, "rate"))} (median of ${ROUNDS} neighbour ratios)`);
}
// Wall time on a shared machine measures its load as much as the client; CPU time less so.
const cpus = (list) => fmt(median(list.map((r) => r.cpuMs)));
console.log(`client CPU for ${MIB} MiB, ms (median): C++ ${cpus(cppRuns)} | ${pkgs.map((c, i) => `${c.name} ${cpus(runs[i].mine)}`).join(" | ")}`);
for (let i = 0; i < pkgs.length; i++) {
  console.log(`  client CPU ratio ${pkgs[i].name} / C++: ${fmt(ratio(runs[i].mine, runs[i].cpp, "cpuMs"))}`);
}
