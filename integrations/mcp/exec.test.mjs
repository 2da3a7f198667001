// terminal_exec, as a model uses it: a shell started with shell_integration, commands run in
// it one after another, their exit codes and outputs; a command that asks for input, answered
// with terminal_write and waited for; the refusals.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { connect, tool, toolError } from "./mcp-client.mjs";

let client;
const dir = mkdtempSync(path.join(tmpdir(), "ptyvisor-mcp-exec-"));
chmodSync(dir, 0o755);
const started = [];

before(async () => {
  client = await connect();
});

after(async () => {
  for (const id of started) await client?.callTool({ name: "terminal_kill", arguments: { id } });
  await client?.close();
});

async function shell(argv) {
  const r = await tool(client, "terminal_start", { cwd: dir, argv, shell_integration: true, env: { LANG: "C.UTF-8" } });
  started.push(r.id);
  const w = await tool(client, "terminal_wait", { id: r.id, for: "prompt", timeout_ms: 20000 });
  assert.equal(w.reason, "prompt");
  return r.id;
}

for (const name of ["bash", "zsh"]) {
  test(`${name}: exit codes, output, state kept from one command to the next`, async () => {
    const id = await shell([name]);
    let r = await tool(client, "terminal_exec", { id, command: "echo hello; (exit 7)" });
    assert.equal(r.state, "exited");
    assert.equal(r.exit_code, 7);
    assert.equal(r.output, "hello\n");
    assert.equal(r.truncated, false);
    assert.equal(r.seq, 1);
    assert.ok(r.offsets.end > r.offsets.start);

    r = await tool(client, "terminal_exec", { id, command: "cd / && export GREETING=hi" });
    assert.equal(r.exit_code, 0);
    r = await tool(client, "terminal_exec", { id, command: 'echo "$GREETING from $(pwd)"' });
    assert.equal(r.output, "hi from /\n");
    assert.equal(r.seq, 3);

    r = await tool(client, "terminal_exec", { id, command: "false" });
    assert.deepEqual([r.state, r.exit_code, r.output], ["exited", 1, ""]);
  });

  test(`${name}: long output comes condensed, head and tail, within max_output_bytes`, async () => {
    const id = await shell([name]);
    const r = await tool(client, "terminal_exec", { id, command: "seq 1 100000", max_output_bytes: 2000 });
    assert.equal(r.state, "exited", JSON.stringify(r));
    assert.equal(r.exit_code, 0);
    assert.equal(r.truncated, true);
    assert.ok(Buffer.byteLength(r.output) <= 2000, `${Buffer.byteLength(r.output)} bytes`);
    assert.match(r.output, /^1\n2\n3\n/);
    assert.match(r.output, /\n100000\n?$/);
    assert.match(r.output, /omitted/);
  });

  test(`${name}: a command that asks is answered, then waited for`, async () => {
    const id = await shell([name]);
    const r = await tool(client, "terminal_exec", { id, command: "printf 'name? '; read answer; echo got $answer" });
    assert.equal(r.state, "waiting_for_input");
    assert.equal(r.exit_code, null);
    assert.match(r.output, /name\?/);
    await tool(client, "terminal_write", { id, text: "ada", keys: ["Enter"] });
    const w = await tool(client, "terminal_wait", { id, for: "command", after: r.seq - 1, timeout_ms: 20000 });
    assert.equal(w.reason, "command");
    assert.equal(w.command.seq, r.seq);
    assert.equal(w.command.exit_code, 0);
  });

  test(`${name}: a timeout leaves the command running`, async () => {
    const id = await shell([name]);
    const r = await tool(client, "terminal_exec", { id, command: "sleep 2; echo late", timeout_ms: 300 });
    assert.equal(r.state, "timeout");
    assert.equal(r.exit_code, null);
    const w = await tool(client, "terminal_wait", { id, for: "command", after: r.seq - 1, timeout_ms: 20000 });
    assert.equal(w.command.exit_code, 0);
  });
}

test("a session without shell integration says how to get one", async () => {
  const r = await tool(client, "terminal_start", { cwd: dir, argv: ["bash"] });
  started.push(r.id);
  const message = await toolError(client, "terminal_exec", { id: r.id, command: "true" });
  assert.match(message, /shell_integration: true/);
  assert.match(message, /no_shell_integration/);
  // Waiting for input needs no integration: the kernel tells.
  const w = await tool(client, "terminal_wait", { id: r.id, for: "input", timeout_ms: 20000 });
  assert.equal(w.reason, "input");
});

test("a command line must be one line", async () => {
  const r = await tool(client, "terminal_start", { cwd: dir, shell_integration: true });
  started.push(r.id);
  const message = await toolError(client, "terminal_exec", { id: r.id, command: "echo a\necho b" });
  assert.match(message, /'command'/);
});
