// Push, not poll: a session as an MCP resource, subscribed with the official SDK client.
// The server tells of a command's end, of a program waiting for input and of the session's
// exit with notifications/resources/updated; the test awaits the notifications (a timeout is
// only a failure bound) and reads the resource after each.
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, test } from "node:test";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { closeAll, connect, tool } from "./mcp-client.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
// The daemon's own bash integration script (test.sh copies it here), started as the daemon
// starts it for START's shell_integration: the shell writes the OSC 133 marks that make
// command records.
const integration = path.join(here, "shell-integration", "ptyvisor.bash");

after(closeAll);

// Notifications as they arrive, and whoever awaits the next one.
function updates(client) {
  const queue = [];
  let wake = null;
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    queue.push(n.params);
    wake?.();
  });
  // The next notification for `uri` whose event is `event` (others are passed over).
  return async function next(uri, event, timeoutMs = 20000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = queue.findIndex((p) => p.uri === uri && p._meta?.event === event);
      if (i >= 0) return queue.splice(0, i + 1).at(-1);
      const left = deadline - Date.now();
      if (left <= 0) assert.fail(`no ${event} notification for ${uri}; got ${JSON.stringify(queue)}`);
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  };
}

async function read(client, uri) {
  const r = await client.readResource({ uri });
  assert.equal(r.contents.length, 1);
  assert.equal(r.contents[0].uri, uri);
  assert.equal(r.contents[0].mimeType, "application/json");
  return JSON.parse(r.contents[0].text);
}

test("a subscribed session tells of a command's end, an input wait and its exit", async () => {
  const client = await connect();
  assert.equal(client.getServerCapabilities().resources?.subscribe, true);
  const next = updates(client);
  const { id } = await tool(client, "terminal_start", { command: `exec bash --rcfile '${integration}' -i` });
  const uri = `ptyvisor://sessions/${id}`;

  const listed = await client.listResources();
  assert.ok(listed.resources.some((r) => r.uri === uri), JSON.stringify(listed));

  await client.subscribeResource({ uri });
  // Subscribing twice is one subscription.
  await client.subscribeResource({ uri });

  await tool(client, "terminal_write", { id, text: "true\r" });
  await next(uri, "command_end");
  let state = await read(client, uri);
  assert.equal(state.state, "running");
  assert.equal(state.recent_commands.at(-1).command, "true");
  assert.equal(state.recent_commands.at(-1).exit_code, 0);

  await tool(client, "terminal_write", { id, text: "read x\r" });
  // The shell waiting at its prompt is an input wait too: the one awaited is read's.
  for (let waits = 0; ; waits++) {
    await next(uri, "input");
    state = await read(client, uri);
    if (state.current_command?.command === "read x") break;
    assert.ok(waits < 3, `read x never waited: ${JSON.stringify(state)}`);
  }
  assert.equal(state.waiting_for_input, true);
  assert.equal(state.at_prompt, false);

  await tool(client, "terminal_write", { id, text: "done\r" });
  await next(uri, "command_end");
  await tool(client, "terminal_write", { id, text: "exit 7\r" });
  await next(uri, "exit");
  state = await read(client, uri);
  assert.equal(state.state, "exited");
  assert.equal(state.exit.code, 7);
  assert.equal(state.recent_commands.at(-1).command, "read x");

  // The subscription ended with the session; unsubscribing is still fine.
  await client.unsubscribeResource({ uri });
  await client.close();
});

test("resources of sessions that do not exist are errors", async () => {
  const client = await connect();
  const uri = "ptyvisor://sessions/0123456789abcdef0123456789abcdef";
  await assert.rejects(client.readResource({ uri }), /Resource not found/);
  await assert.rejects(client.subscribeResource({ uri }), /Resource not found/);
  await assert.rejects(client.readResource({ uri: "file:///etc/passwd" }), /Resource not found/);
  await client.close();
});
