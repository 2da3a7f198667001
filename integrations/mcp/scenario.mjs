// Figures, not pass/fail: two scripted agents do the same three tasks through `ptyvisor mcp`
// with the official SDK client, and we count what each spent: every tool call and resources/*
// request, and the bytes of text content it received (what a model would read).
//
//  1. a dev server: start `python3 -m http.server PORT` in its own session, learn that it
//     serves, fetch it once with curl in the agent's shell and get 200;
//  2. a failing test: run a test script, learn its exit status (1) and its FAILED line;
//  3. an interactive prompt: run a script that asks `Continue? [y/N] `, answer y, get its
//     last line (`answered y`) and its exit status (0).
//
// "before" uses the tools that existed before protocol version 4, as agents use them today:
// one plain bash session, each command line typed with `; echo "__EXIT=$?"` after it, then a
// bounded loop of terminal_wait for quiet and terminal_read until the marker shows.
// "before-wait" is that agent at its best with the same tools: one terminal_wait for the
// marker's pattern instead of the loop, then a read.
// "after" uses a shell_integration session, terminal_exec, a push-based terminal_wait and the
// session's resource notifications: no loop that asks again and again.
//
// Both agents assert their results; a run that fails exits non-zero. MCP_SCENARIO_RUNS
// (default 3) runs the agents that many times, alternating; MCP_SCENARIO_TRACE=1 prints each
// call and the text it received on stderr. Stopping the sessions afterwards
// is not counted (the same for both).
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { connect } from "./mcp-client.mjs";

const RUNS = Number(process.env.MCP_SCENARIO_RUNS ?? 3);
// The before agent's habits: how long a quiet pause must be before it reads, how long it waits
// for one, and how many rounds it allows itself before giving up.
const QUIET_MS = 500;
const QUIET_TIMEOUT_MS = 5000;
const MAX_ROUNDS = 40;

const dir = mkdtempSync(path.join(tmpdir(), "ptyvisor-mcp-scenario-"));
chmodSync(dir, 0o755);
function script(name, body) {
  const file = path.join(dir, name);
  writeFileSync(file, `#!/bin/bash\n${body}`, { mode: 0o755 });
  return file;
}
// A test run with pauses as real ones have (collection, a slow test), so that its output comes
// in bursts.
const failingTest = script(
  "run-tests.sh",
  `echo "collecting tests..."; sleep 0.3
echo "test_parse ... ok"; sleep 0.8
echo "test_render ... ok"; sleep 0.2
echo "test_x ... FAILED"
echo "FAILED: test_x (expected 3, got 4)"
echo "2 passed, 1 failed"
exit 1
`,
);
const askScript = script(
  "ask.sh",
  `echo "checking the workspace..."; sleep 0.6
read -r -p "Continue? [y/N] " answer
echo "answered $answer"; sleep 0.2
[ "$answer" = y ]
`,
);

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const textBytes = (items) => items.reduce((n, c) => n + (typeof c.text === "string" ? Buffer.byteLength(c.text) : 0), 0);

// An MCP client that counts: calls by name, bytes of text received, per task and in all.
class CountingAgent {
  constructor(name, client) {
    this.name = name;
    this.client = client;
    this.calls = {};
    this.bytes = 0;
    this.notifications = 0;
    this.tasks = [];
    this.task = null;
    this.cleanup = [];
  }
  count(what, bytes, text = "") {
    if (process.env.MCP_SCENARIO_TRACE) console.error(`${this.name} ${this.task.name} ${what} ${bytes}: ${text}`);
    this.calls[what] = (this.calls[what] ?? 0) + 1;
    this.bytes += bytes;
    this.task.calls += 1;
    this.task.bytes += bytes;
  }
  async run(taskName, fn) {
    this.task = { name: taskName, calls: 0, bytes: 0, ms: 0 };
    const t0 = performance.now();
    await fn();
    this.task.ms = performance.now() - t0;
    this.tasks.push(this.task);
  }
  async tool(name, args) {
    const result = await this.client.callTool({ name, arguments: args });
    this.count(name, textBytes(result.content ?? []), JSON.stringify(result.content?.map((c) => c.text)));
    assert.equal(result.isError, false, `${name} failed: ${result.content?.[0]?.text}`);
    return result.structuredContent;
  }
  async subscribe(uri) {
    const result = await this.client.subscribeResource({ uri });
    this.count("resources/subscribe", 0);
    return result;
  }
  async readResource(uri) {
    const result = await this.client.readResource({ uri });
    this.count("resources/read", textBytes(result.contents));
    return JSON.parse(result.contents[0].text);
  }
  async close() {
    for (const id of this.cleanup) await this.client.callTool({ name: "terminal_kill", arguments: { id } });
    await this.client.close();
  }
}

// --- before: type, then wait for quiet and read until the marker shows ----------------------

// Reads (after a quiet pause each time) until `done(text so far)` holds; returns the text.
async function pollUntil(agent, id, done, what) {
  let text = "";
  for (let round = 0; round < MAX_ROUNDS; round++) {
    await agent.tool("terminal_wait", { id, for: "quiet", quiet_ms: QUIET_MS, timeout_ms: QUIET_TIMEOUT_MS });
    const r = await agent.tool("terminal_read", { id });
    text += r.text;
    if (done(text)) return text;
  }
  assert.fail(`${agent.name}: ${what} never showed in ${MAX_ROUNDS} rounds:\n${text}`);
}

// Types `line; echo "__EXIT=$?"` and polls until the marker; returns {output, exit}.
async function typeAndPoll(agent, id, line) {
  await agent.tool("terminal_write", { id, text: `${line}; echo "__EXIT=$?"`, keys: ["Enter"] });
  const marker = /__EXIT=(\d+)/;
  const text = await pollUntil(agent, id, (t) => marker.test(t), "the exit marker");
  return { output: text, exit: Number(text.match(marker)[1]) };
}

async function before(client, port) {
  const agent = new CountingAgent("before", client);
  const t0 = performance.now();
  let shell;
  await agent.run("the agent's shell", async () => {
    ({ id: shell } = await agent.tool("terminal_start", { argv: ["bash"], cwd: dir, env: { LANG: "C.UTF-8" } }));
    agent.cleanup.push(shell);
  });

  await agent.run("dev server", async () => {
    const { id: server } = await agent.tool("terminal_start", {
      argv: ["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1"],
      cwd: dir,
    });
    agent.cleanup.push(server);
    await pollUntil(agent, server, (t) => t.includes("Serving HTTP"), "Serving HTTP");
    const r = await typeAndPoll(agent, shell, `curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${port}/`);
    assert.equal(r.exit, 0);
    assert.match(r.output, /200__EXIT=0/);
  });

  await agent.run("failing test", async () => {
    const r = await typeAndPoll(agent, shell, failingTest);
    assert.equal(r.exit, 1);
    assert.match(r.output, /^FAILED: test_x/m);
  });

  await agent.run("prompt", async () => {
    await agent.tool("terminal_write", { id: shell, text: `${askScript}; echo "__EXIT=$?"`, keys: ["Enter"] });
    await pollUntil(agent, shell, (t) => t.includes("Continue? [y/N]"), "the question");
    await agent.tool("terminal_write", { id: shell, text: "y", keys: ["Enter"] });
    const text = await pollUntil(agent, shell, (t) => /__EXIT=\d+/.test(t), "the exit marker");
    assert.match(text, /^answered y/m);
    assert.equal(Number(text.match(/__EXIT=(\d+)/)[1]), 0);
  });
  agent.ms = performance.now() - t0;
  return agent;
}

// --- before, at its best: the same tools, a text wait for the marker instead of the loop -----

// What an agent that knows terminal_wait's pattern does without version 4: still the marker
// (the only way to learn an exit code), but one wait for it and one read of what came.
async function beforeWait(client, port) {
  const agent = new CountingAgent("before-wait", client);
  const t0 = performance.now();
  let shell;
  let from = 0;  // where the agent's last read of its shell stopped
  async function waitAndRead(pattern) {
    const w = await agent.tool("terminal_wait", { id: shell, pattern, from, timeout_ms: 20000 });
    assert.equal(w.reason, "text", JSON.stringify(w));
    let text = "";
    for (let more = true; more; ) {
      const r = await agent.tool("terminal_read", { id: shell });
      text += r.text;
      from = r.next_offset;
      more = r.more;
    }
    return text;
  }
  async function typeAndWait(line) {
    await agent.tool("terminal_write", { id: shell, text: `${line}; echo "__EXIT=$?"`, keys: ["Enter"] });
    const text = await waitAndRead("__EXIT=[0-9]+");
    return { output: text, exit: Number(text.match(/__EXIT=(\d+)/)[1]) };
  }
  await agent.run("the agent's shell", async () => {
    ({ id: shell } = await agent.tool("terminal_start", { argv: ["bash"], cwd: dir, env: { LANG: "C.UTF-8" } }));
    agent.cleanup.push(shell);
  });

  await agent.run("dev server", async () => {
    const { id: server } = await agent.tool("terminal_start", {
      argv: ["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1"],
      cwd: dir,
    });
    agent.cleanup.push(server);
    const w = await agent.tool("terminal_wait", { id: server, for: "text", pattern: "Serving HTTP", timeout_ms: 20000 });
    assert.equal(w.reason, "text");
    const r = await typeAndWait(`curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${port}/`);
    assert.equal(r.exit, 0);
    assert.match(r.output, /200__EXIT=0/);
  });

  await agent.run("failing test", async () => {
    const r = await typeAndWait(failingTest);
    assert.equal(r.exit, 1);
    assert.match(r.output, /^FAILED: test_x/m);
  });

  await agent.run("prompt", async () => {
    await agent.tool("terminal_write", { id: shell, text: `${askScript}; echo "__EXIT=$?"`, keys: ["Enter"] });
    await waitAndRead("Continue\\? \\[y/N\\]");
    await agent.tool("terminal_write", { id: shell, text: "y", keys: ["Enter"] });
    const text = await waitAndRead("__EXIT=[0-9]+");
    assert.match(text, /^answered y/m);
    assert.equal(Number(text.match(/__EXIT=(\d+)/)[1]), 0);
  });
  agent.ms = performance.now() - t0;
  return agent;
}

// --- after: terminal_exec, push-based waits, notifications --------------------------------

// Notifications as they arrive, and whoever awaits the next one of an event for a URI.
function notifications(agent) {
  const queue = [];
  let wake = null;
  agent.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    agent.notifications += 1;
    if (process.env.MCP_SCENARIO_TRACE) console.error(`${agent.name} notification ${JSON.stringify(n.params)}`);
    queue.push(n.params);
    wake?.();
  });
  return {
    // Forgets what came so far: the next awaited one is newer than this.
    mark() {
      queue.length = 0;
    },
    async next(uri, event, timeoutMs = 20000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const i = queue.findIndex((p) => p.uri === uri && p._meta?.event === event);
        if (i >= 0) return queue.splice(0, i + 1).at(-1);
        const left = deadline - Date.now();
        if (left <= 0) assert.fail(`no ${event} notification for ${uri}`);
        await new Promise((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = null;
      }
    },
  };
}

async function after(client, port) {
  const agent = new CountingAgent("after", client);
  const updates = notifications(agent);
  const t0 = performance.now();
  let shell, uri;
  await agent.run("the agent's shell", async () => {
    ({ id: shell } = await agent.tool("terminal_start", { argv: ["bash"], shell_integration: true, cwd: dir, env: { LANG: "C.UTF-8" } }));
    agent.cleanup.push(shell);
    uri = `ptyvisor://sessions/${shell}`;
    await agent.subscribe(uri);
  });

  await agent.run("dev server", async () => {
    const { id: server } = await agent.tool("terminal_start", {
      argv: ["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1"],
      cwd: dir,
    });
    agent.cleanup.push(server);
    const w = await agent.tool("terminal_wait", { id: server, for: "text", pattern: "Serving HTTP", timeout_ms: 20000 });
    assert.equal(w.reason, "text");
    const r = await agent.tool("terminal_exec", { id: shell, command: `curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:${port}/` });
    assert.equal(r.state, "exited");
    assert.equal(r.exit_code, 0);
    assert.match(r.output, /^200/);
  });

  await agent.run("failing test", async () => {
    const r = await agent.tool("terminal_exec", { id: shell, command: failingTest });
    assert.equal(r.state, "exited");
    assert.equal(r.exit_code, 1);
    assert.match(r.output, /^FAILED: test_x/m);
  });

  await agent.run("prompt", async () => {
    const r = await agent.tool("terminal_exec", { id: shell, command: askScript });
    assert.equal(r.state, "waiting_for_input", JSON.stringify(r));
    assert.match(r.output, /Continue\? \[y\/N\]/);
    updates.mark();
    await agent.tool("terminal_write", { id: shell, text: "y", keys: ["Enter"] });
    // Pushed by the server; no call until it comes.
    await updates.next(uri, "command_end");
    // The record of our command (after = seq - 1: it has ended, so this answers at once).
    const w = await agent.tool("terminal_wait", { id: shell, for: "command", after: r.seq - 1, timeout_ms: 20000 });
    assert.equal(w.reason, "command");
    assert.equal(w.command.seq, r.seq);
    assert.equal(w.command.exit_code, 0);
    // Only what came after the question, which terminal_exec already gave.
    const out = await agent.tool("terminal_read", { id: shell, offset: r.offsets.end, to: w.command.output_end });
    assert.match(out.text, /^answered y/m);
  });
  agent.ms = performance.now() - t0;
  return agent;
}

// --- the figures ------------------------------------------------------------------------------

const TOOLS = ["terminal_start", "terminal_write", "terminal_read", "terminal_wait", "terminal_exec", "resources/subscribe", "resources/read"];
const total = (a) => Object.values(a.calls).reduce((x, y) => x + y, 0);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const results = { before: [], "before-wait": [], after: [] };
const loads = [];
for (let run = 0; run < RUNS; run++) {
  // Alternate which goes first, so neither always meets a warmer machine.
  const order = run % 2 ? [after, beforeWait, before] : [before, beforeWait, after];
  for (const agentFn of order) {
    const client = await connect();
    const agent = await agentFn(client, await freePort());
    await agent.close();
    results[agent.name].push(agent);
  }
  loads.push(loadavg().map((x) => x.toFixed(2)).join(" "));
}

console.log(`\n${RUNS} runs; load (1/5/15 min) after each: ${loads.join("; ")}\n`);
console.log(`| agent | run | ${TOOLS.join(" | ")} | total calls | bytes received | notifications | wall ms |`);
console.log(`| --- | ---: | ${TOOLS.map(() => "---:").join(" | ")} | ---: | ---: | ---: | ---: |`);
for (const name of Object.keys(results)) {
  results[name].forEach((a, i) => {
    console.log(`| ${name} | ${i + 1} | ${TOOLS.map((t) => a.calls[t] ?? 0).join(" | ")} | ${total(a)} | ${a.bytes} | ${a.notifications} | ${a.ms.toFixed(0)} |`);
  });
}

console.log(`\nPer task (median over the runs):\n`);
const names = Object.keys(results);
console.log(`| task | ${["calls", "bytes", "ms"].flatMap((k) => names.map((n) => `${n} ${k}`)).join(" | ")} |`);
console.log(`| --- | ${["calls", "bytes", "ms"].flatMap(() => names.map(() => "---:")).join(" | ")} |`);
for (const [i, task] of results.before[0].tasks.entries()) {
  const m = (name, key) => median(results[name].map((a) => a.tasks[i][key]));
  const cells = ["calls", "bytes", "ms"].flatMap((k) => names.map((n) => (k === "ms" ? m(n, k).toFixed(0) : m(n, k))));
  console.log(`| ${task.name} | ${cells.join(" | ")} |`);
}

const med = (name, f) => median(results[name].map(f));
console.log("");
for (const base of ["before", "before-wait"]) {
  const [bc, ac] = [med(base, total), med("after", total)];
  const [bb, ab] = [med(base, (a) => a.bytes), med("after", (a) => a.bytes)];
  const [bt, at] = [med(base, (a) => a.ms), med("after", (a) => a.ms)];
  console.log(`Medians, after/${base}: tool calls ${ac}/${bc} = ${(ac / bc).toFixed(2)}; bytes ${ab}/${bb} = ${(ab / bb).toFixed(2)}; wall ms ${at.toFixed(0)}/${bt.toFixed(0)} = ${(at / bt).toFixed(2)}`);
}
