// Session start and throughput from this runtime (Node or Bun) with the ptyvisor package,
// against the C++ client ($PTYVISOR_BIN run -- ...) in the same run, printed as ratios.
// Run under scripts/with-daemon.sh (it sets PTYVISOR_SOCKET and PTYVISOR_BIN):
//   scripts/with-daemon.sh --build BUILD -- node bench/client_bench.mjs [--starts N] [--mib M]
import { spawn as spawnProcess } from "node:child_process";
import { Client } from "ptyvisor";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const STARTS = option("--starts", 100);
const MIB = option("--mib", 64);
const runtime = globalThis.Bun ? `bun ${Bun.version}` : `node ${process.versions.node}`;
const cli = process.env.PTYVISOR_BIN;
if (!cli) throw new Error("PTYVISOR_BIN is not set: run under scripts/with-daemon.sh");
const client = new Client();

const now = () => Number(process.hrtime.bigint()) / 1e6; // ms

function percentile(samples, p) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Runs a process to its end, output discarded; resolves with its exit code. */
function runProcess(argv) {
  return new Promise((resolve, reject) => {
    const child = spawnProcess(argv[0], argv.slice(1), { stdio: ["ignore", "ignore", "inherit"] });
    child.on("error", reject);
    child.on("exit", (code) => resolve(code));
  });
}

async function timeEach(n, once) {
  const samples = [];
  for (let i = 0; i < n; i++) {
    const t0 = now();
    await once();
    samples.push(now() - t0);
  }
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

/** C++ client: `ptyvisor run -- true`, the whole round trip of a short command. */
async function cppStart() {
  const code = await runProcess([cli, "run", "--", "true"]);
  if (code !== 0) throw new Error(`ptyvisor run -- true exited ${code}`);
}

/** This package: open a session for `true` and wait for its EXIT. */
async function ourStart() {
  const session = await client.open(["true"]);
  const exit = await session.exited;
  if (exit.code !== 0) throw new Error(`true exited ${JSON.stringify(exit)}`);
}

/** The cost of the other way to pass the fd: one helper process per START. */
async function helperSpawn() {
  await runProcess(["/bin/true"]);
}

/** Seconds in the form `times` prints them: 0m0.123s. */
function shellSeconds(text) {
  const m = /(\d+)m([\d.]+)s/.exec(text);
  return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
}

/** C++ client: throughput, and its CPU time (user + system, from the shell's `times`). */
async function cppThroughput(bytes) {
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
}

/** This package: throughput, and this process's CPU time during the run. */
async function ourThroughput(bytes) {
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
}

const fmt = (x) => x.toFixed(2);
console.log(`ptyvisor client benchmark: ${runtime}, ${STARTS} starts, ${MIB} MiB`);

// Interleaved warm-up, then the measured runs alternate so that load on the machine hits both.
await cppStart();
await ourStart();
const cpp = await timeEach(STARTS, cppStart);
const ours = await timeEach(STARTS, ourStart);
const helper = await timeEach(STARTS, helperSpawn);
console.log(`start (run \`true\` to its exit), ms: C++ p50 ${fmt(cpp.p50)} p99 ${fmt(cpp.p99)} | ${runtime} p50 ${fmt(ours.p50)} p99 ${fmt(ours.p99)}`);
console.log(`start ratio (${runtime} / C++, goal <= 1.5): p50 ${fmt(ours.p50 / cpp.p50)} p99 ${fmt(ours.p99 / cpp.p99)}`);
console.log(`a helper process per START would add: p50 ${fmt(helper.p50)} ms, p99 ${fmt(helper.p99)} ms (spawn of /bin/true from ${runtime})`);

const bytes = MIB * 1048576;
const cppRuns = [];
const ourRuns = [];
for (let i = 0; i < 5; i++) {
  cppRuns.push(await cppThroughput(bytes));
  ourRuns.push(await ourThroughput(bytes));
}
const best = (runs) => Math.max(...runs.map((r) => r.rate));
const leastCpu = (runs) => Math.min(...runs.map((r) => r.cpuMs));
console.log(`throughput, MiB/s (best of 5): C++ ${fmt(best(cppRuns))} | ${runtime} ${fmt(best(ourRuns))}`);
console.log(`throughput ratio (${runtime} / C++, goal >= 0.8): ${fmt(best(ourRuns) / best(cppRuns))}`);
// Wall time on a shared machine measures its load as much as the client; CPU time does not.
console.log(`client CPU for ${MIB} MiB, ms (least of 5): C++ ${fmt(leastCpu(cppRuns))} | ${runtime} ${fmt(leastCpu(ourRuns))}`);
console.log(`client CPU ratio (${runtime} / C++): ${fmt(leastCpu(ourRuns) / leastCpu(cppRuns))}`);
