// Figures, not pass/fail: how long tool calls take through `ptyvisor mcp` with the SDK's
// client, against the daemon that test.sh --bench starts. Prints the median and the 90th
// percentile of each, measured here with performance.now().
import { connect, tool } from "./mcp-client.mjs";

const ROUNDS = Number(process.env.MCP_BENCH_ROUNDS ?? 200);

function summary(name, samples, extra = "") {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  console.log(`${name.padEnd(44)} n=${String(samples.length).padStart(4)}  median ${at(0.5).toFixed(2)} ms  p90 ${at(0.9).toFixed(2)} ms${extra}`);
}

async function timed(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

const client = await connect();

const ping = [];
for (let i = 0; i < ROUNDS; i++) ping.push(await timed(() => client.ping()));
summary("ping (no daemon involved)", ping);

const list = [];
for (let i = 0; i < ROUNDS; i++) list.push(await timed(() => tool(client, "terminal_list")));
summary("terminal_list", list);

// Type a line into cat and wait until its echo is in the log: a keystroke's round trip.
const { id: cat } = await tool(client, "terminal_start", { argv: ["cat"] });
const echo = [];
for (let i = 0; i < ROUNDS; i++) {
  echo.push(
    await timed(async () => {
      await tool(client, "terminal_write", { id: cat, text: `line-${i}`, keys: ["Enter"] });
      await tool(client, "terminal_wait", { id: cat, pattern: `line-${i}\\r\\n.*line-${i}\\r\\n`, from: "start", timeout_ms: 10000 });
    }),
  );
}
summary("terminal_write + terminal_wait for its echo", echo);
await tool(client, "terminal_kill", { id: cat });

// Read about 1 MB of coloured output (16384 lines of 61 bytes) in order (`to`), 64 KiB pieces, stripped.
const { id: big } = await tool(client, "terminal_start", {
  command: "python3 -c \"import sys\nfor i in range(16384): sys.stdout.write('\\x1b[32m' + 'x' * 50 + '\\x1b[0m\\n')\"",
});
const { offset: end } = await tool(client, "terminal_wait", { id: big, timeout_ms: 60000 });
let bytes = 0;
const reads = [];
for (let more = true; more; ) {
  let r;
  reads.push(await timed(async () => (r = await tool(client, "terminal_read", { id: big, max_bytes: 65536, to: end }))));
  bytes += r.next_offset - r.offset;
  more = r.more;
}
const total = reads.reduce((a, b) => a + b, 0);
summary("terminal_read, 64 KiB pieces, stripped", reads,
        `  (${(bytes / 1048576).toFixed(2)} MiB in ${total.toFixed(0)} ms: ${(bytes / 1048576 / (total / 1000)).toFixed(1)} MiB/s)`);

await client.close();
