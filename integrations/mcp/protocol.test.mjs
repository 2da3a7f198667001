// The protocol around the tools: version negotiation, bad arguments, a missing daemon, and
// raw JSON-RPC lines as a client that is not the SDK might send them.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { after, test } from "node:test";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { closeAll, connect, serverParams, tool, toolError } from "./mcp-client.mjs";

// A failed test leaves its client open: close them all, so that a failure is reported
// rather than waited on.
after(closeAll);

const unknownId = "0123456789abcdef0123456789abcdef";

// The server on raw pipes: send(lines) writes them, next() resolves with each reply.
function rawServer(extraArgs = []) {
  const params = serverParams(extraArgs);
  const child = spawn(params.command, params.args, { env: params.env, stdio: ["pipe", "pipe", "inherit"] });
  const replies = [];
  const waiters = [];
  createInterface({ input: child.stdout }).on("line", (line) => {
    const message = JSON.parse(line);
    if (waiters.length > 0) waiters.shift()(message);
    else replies.push(message);
  });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  return {
    send: (...lines) => child.stdin.write(lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l)) + "\n").join("")),
    next: () => (replies.length > 0 ? Promise.resolve(replies.shift()) : new Promise((r) => waiters.push(r))),
    close: () => {
      child.stdin.end();
      return exited;
    },
  };
}

const initialize = (id, protocolVersion) => ({
  jsonrpc: "2.0",
  id,
  method: "initialize",
  params: { protocolVersion, capabilities: {}, clientInfo: { name: "raw", version: "1" } },
});

test("the SDK's client negotiates its newest version", async () => {
  const client = await connect();
  assert.equal(client.getServerVersion().name, "ptyvisor");
  assert.ok(client.getServerCapabilities().tools);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), [
    "terminal_exec", "terminal_kill", "terminal_list", "terminal_read", "terminal_resize",
    "terminal_screen", "terminal_start", "terminal_wait", "terminal_write",
  ]);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, "object");
    assert.ok(t.description.length > 80, `${t.name} is described`);
  }
  await client.close();
});

test("an older protocol version is accepted as it is; an unknown one gets our newest", async () => {
  const server = rawServer();
  server.send(initialize(1, "2024-11-05"));
  const old = await server.next();
  assert.equal(old.id, 1);
  assert.equal(old.result.protocolVersion, "2024-11-05");
  server.send(initialize(2, "2099-01-01"));
  const unknown = await server.next();
  assert.equal(unknown.result.protocolVersion, "2025-11-25");
  assert.equal(await server.close(), 0);
});

test("raw JSON-RPC: parse errors, unknown methods, ping, and no reply to notifications", async () => {
  const server = rawServer();
  server.send("{this is not json");
  const parse = await server.next();
  assert.equal(parse.error.code, -32700);
  assert.equal(parse.id, null);
  server.send({ jsonrpc: "2.0", id: 1, method: "tools/list" });
  assert.equal((await server.next()).error.code, -32600, "tools/list before initialize");
  server.send(initialize(2, "2025-06-18"), { jsonrpc: "2.0", method: "notifications/initialized" });
  assert.equal((await server.next()).id, 2);
  server.send({ jsonrpc: "2.0", id: 3, method: "ping" });
  assert.deepEqual(await server.next(), { jsonrpc: "2.0", id: 3, result: {} });
  server.send({ jsonrpc: "2.0", id: 4, method: "prompts/list" });
  const unknown = await server.next();
  assert.equal(unknown.error.code, -32601);
  assert.match(unknown.error.message, /prompts\/list/);
  assert.equal(await server.close(), 0);
});

test("a cancelled wait is not answered, and the server goes on", async () => {
  const server = rawServer();
  server.send(initialize(1, "2025-06-18"), { jsonrpc: "2.0", method: "notifications/initialized" });
  await server.next();
  server.send({ jsonrpc: "2.0", id: 2, method: "tools/call",
                params: { name: "terminal_start", arguments: { argv: ["sleep", "600"] } } });
  const { id } = (await server.next()).result.structuredContent;
  server.send({ jsonrpc: "2.0", id: 3, method: "tools/call",
                params: { name: "terminal_wait", arguments: { id, timeout_ms: 600000 } } });
  server.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 3, reason: "test" } });
  server.send({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "terminal_kill", arguments: { id } } });
  const killed = await server.next();
  assert.equal(killed.id, 4, "the next reply is the kill's: the cancelled wait got none");
  assert.equal(killed.result.structuredContent.state, "exited");
  assert.equal(await server.close(), 0);
});

test("bad arguments are tool errors that say what is wrong", async () => {
  const client = await connect();
  assert.match(await toolError(client, "terminal_read", { id: 42 }), /'id' must be a string/);
  assert.match(await toolError(client, "terminal_read", { id: "nope" }), /'id'/);
  assert.match(await toolError(client, "terminal_read", { id: unknownId, max_bytes: 1e9 }), /'max_bytes' must be an integer from 1 to 65536/);
  assert.match(await toolError(client, "terminal_start", {}), /exactly one of 'command' and 'argv'/);
  assert.match(await toolError(client, "terminal_start", { command: "true", colour: "red" }), /unknown argument 'colour'/);
  assert.match(await toolError(client, "terminal_write", { id: unknownId, keys: ["Ctrl+Alt+Del"] }), /not a key name/);
  assert.match(await toolError(client, "terminal_wait", { id: unknownId, for: "text" }), /needs a non-empty 'pattern'/);
  assert.match(await toolError(client, "terminal_kill", { id: unknownId, signal: "SIGNOPE" }), /'signal'/);
  assert.match(await toolError(client, "terminal_resize", { id: unknownId, cols: 80 }), /'cols' and 'rows' are required/);
  assert.match(await toolError(client, "terminal_screen", { id: unknownId, scrollback: 10001 }), /'scrollback' must be an integer from 0 to 10000/);
  assert.match(await toolError(client, "terminal_screen", { id: unknownId, attributes: "yes" }), /'attributes' must be true or false/);
  await client.close();
});

test("an unknown session id is a tool error from the daemon, for every tool", async () => {
  const client = await connect();
  for (const [name, args] of [
    ["terminal_read", {}],
    ["terminal_write", { text: "x" }],
    ["terminal_wait", { timeout_ms: 1000 }],
    ["terminal_kill", {}],
    ["terminal_resize", { cols: 80, rows: 24 }],
    ["terminal_screen", { scrollback: 5 }],
  ]) {
    assert.match(await toolError(client, name, { id: unknownId, ...args }), /no_such_session/, name);
  }
  await client.close();
});

test("an unknown tool is a protocol error (-32602)", async () => {
  const client = await connect();
  await assert.rejects(client.callTool({ name: "terminal_teleport", arguments: {} }), (e) => {
    assert.ok(e instanceof McpError);
    assert.equal(e.code, -32602);
    assert.match(e.message, /unknown tool 'terminal_teleport'/);
    return true;
  });
  await client.close();
});

test("no daemon: tool errors, and the server stays up", async () => {
  const client = await connect(["--socket", "/nonexistent/ptyvisor.sock"]);
  assert.match(await toolError(client, "terminal_list"), /cannot reach ptyvisord: .*nonexistent/);
  assert.match(await toolError(client, "terminal_start", { command: "true" }), /cannot reach ptyvisord/);
  assert.match(await toolError(client, "terminal_screen", { id: unknownId }), /cannot reach ptyvisord/);
  await client.ping();
  await client.close();
});

test("a session started by one server is read by the next: sessions outlive the server", async () => {
  const first = await connect();
  const { id } = await tool(first, "terminal_start", { command: "echo outlived; exec sleep 600" });
  await tool(first, "terminal_wait", { id, pattern: "outlived", timeout_ms: 20000 });
  await first.close();
  const second = await connect();
  const r = await tool(second, "terminal_read", { id });
  assert.match(r.text, /outlived/);
  assert.equal(r.state, "running");
  assert.equal(r.offset, 0, "a new server reads from the start");
  await tool(second, "terminal_kill", { id });
  await second.close();
});
