// An agent's way to run a test suite: start it in a detached session (it survives the agent's
// own restart), wait for it to end on the daemon's side, read the log, report the status.
//
//   node examples/agent-run-tests.mjs npm test
//   node examples/agent-run-tests.mjs node --test --test-reporter=tap examples/fixtures
import { Client, shellStatus } from "ptyvisor";

const argv = process.argv.slice(2);
if (argv.length === 0) {
  console.error("usage: agent-run-tests.mjs COMMAND [ARG...]");
  process.exit(2);
}

const client = new Client(); // PTYVISOR_SOCKET, else /run/ptyvisor/ptyvisor.sock
const { id } = await client.start(argv, { cwd: process.cwd(), term: "dumb" });
console.log(`session ${id}: ${argv.join(" ")}`);

const done = await client.wait(id, { for: "exit", timeoutMs: 10 * 60 * 1000 });
if (done.reason !== "exit") {
  await client.kill(id);
  console.log(`no result within 10 minutes (${done.reason}); stopped it`);
  process.exit(124);
}

// The whole log, in reads of at most 1 MiB.
const pieces = [];
for (let from = 0; ; ) {
  const part = await client.read(id, { from });
  pieces.push(part.data);
  from = part.offset + part.data.length;
  if (!part.more) break;
}
const lines = Buffer.concat(pieces).toString("utf8").split(/\r?\n/);
console.log(lines.slice(-15).join("\n"));
const status = shellStatus(done.exit);
console.log(`exit status ${status}`);
process.exit(status);
