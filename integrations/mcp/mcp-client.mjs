// Shared by the tests: an MCP client (the official SDK's Client and StdioClientTransport)
// connected to `ptyvisor mcp` started exactly as mcp-config.json (the README's snippet) says.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = path.dirname(fileURLToPath(import.meta.url));

// The server as the documented config starts it. `ptyvisor` is found on PATH, as for an
// agent; here that is the CLI with-daemon.sh installed ($PTYVISOR_BIN). PTYVISOR_SOCKET
// (set by with-daemon.sh) reaches the server through the environment.
export function serverParams(extraArgs = []) {
  const config = JSON.parse(readFileSync(path.join(here, "mcp-config.json"), "utf8"));
  const server = config.mcpServers.ptyvisor;
  assert.ok(process.env.PTYVISOR_BIN, "run through scripts/with-daemon.sh (PTYVISOR_BIN unset)");
  return {
    command: server.command,
    args: [...server.args, ...extraArgs],
    env: {
      ...process.env,
      ...(server.env ?? {}),
      PATH: `${path.dirname(process.env.PTYVISOR_BIN)}:${process.env.PATH}`,
    },
    stderr: "inherit",
  };
}

// Clients connect() made: a test that fails before its own close() leaves its server
// running, which would keep node (and the suite) waiting forever; closeAll() ends them.
const openClients = new Set();

export async function closeAll() {
  const clients = [...openClients];
  openClients.clear();
  await Promise.all(clients.map((c) => c.close()));
}

export async function connect(extraArgs = []) {
  const client = new Client({ name: "ptyvisor-e2e", version: "1.0.0" });
  await client.connect(new StdioClientTransport(serverParams(extraArgs)));
  openClients.add(client);
  // Listing the tools also makes the SDK validate every structuredContent against the
  // tool's outputSchema from here on.
  await client.listTools();
  return client;
}

// Calls a tool that must succeed; returns its structuredContent, after checking that the
// text content carries the same JSON.
export async function tool(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  assert.equal(result.isError, false, `${name} failed: ${result.content?.[0]?.text}`);
  assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
  return result.structuredContent;
}

// Calls a tool that must fail with a tool error; returns its message.
export async function toolError(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  assert.equal(result.isError, true, `${name} should have failed: ${JSON.stringify(result)}`);
  return result.content[0].text;
}

// Reads a session's output (from where the last read stopped) until `more` is false.
export async function readAll(client, id) {
  let text = "";
  for (;;) {
    const r = await tool(client, "terminal_read", { id });
    text += r.text;
    if (!r.more) return { text, last: r };
  }
}

// Calls terminal_screen, which must succeed; returns { text, screen }: the rows as the model
// reads them (the text content) and the SCREEN payload (structuredContent).
export async function screen(client, args) {
  const result = await client.callTool({ name: "terminal_screen", arguments: args });
  assert.equal(result.isError, false, `terminal_screen failed: ${result.content?.[0]?.text}`);
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, "text");
  return { text: result.content[0].text, screen: result.structuredContent };
}

// Takes snapshots until `done(screen)` holds: what a terminal shows changes as the program
// draws, so this waits for the drawing, not for a time. Fails after `timeoutMs`, showing the
// last screen.
export async function screenUntil(client, args, done, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const snapshot = await screen(client, args);
    if (done(snapshot.screen)) return snapshot;
    if (Date.now() > deadline) assert.fail(`the screen never showed what was awaited:\n${snapshot.text}`);
  }
}
