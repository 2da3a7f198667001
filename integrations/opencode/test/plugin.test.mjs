// A scripted agent drives the plugin's tools directly (no opencode), against the real daemon:
// a dev server, a request to it, an edit in vim (reading vim's screen with pty_screen), a
// failing test with its exit notification, Ctrl-C to the server, and nothing left running.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createTools } from "ptyvisor-opencode";
import PtyvisorPlugin from "ptyvisor-opencode";

const notifications = [];
let notified = null;
const tools = createTools({
  notify: async (sessionId, text) => {
    notifications.push({ sessionId, text });
    notified?.();
  },
});
const workdir = fs.mkdtempSync(path.join(os.tmpdir(), "ptyvisor-opencode-"));
const ctx = { sessionID: "ses_scripted_agent", messageID: "msg_1", agent: "build", directory: workdir, worktree: workdir, abort: new AbortController().signal, metadata() {}, ask: async () => {} };

const call = (name, args) => tools[name].execute(args, ctx);
const idOf = (output) => /ID: (pty_[0-9a-f]{32})/.exec(output)[1];

/**
 * pty_screen until it shows every pattern, within a deadline. A full-screen program redraws in
 * place, and no output event says a redraw is over: vim draws its screen, then draws it again
 * once the daemon has answered its terminal queries, and a screen taken in between shows a
 * half-drawn one. So the agent, like a person, looks until the screen shows what it expects.
 */
async function screenShowing(id, patterns, deadlineMs = 15000) {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const screen = await call("pty_screen", { id });
    if (patterns.every((re) => re.test(screen))) return screen;
    if (Date.now() > deadline) assert.fail(`the screen never showed ${patterns.join(" and ")}:\n${screen}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

test("the plugin registers the tools of opencode-pty", async () => {
  const hooks = await PtyvisorPlugin({ client: { session: { promptAsync: async () => {} } } });
  assert.deepEqual(Object.keys(hooks.tool).sort(), ["pty_exec", "pty_kill", "pty_list", "pty_read", "pty_screen", "pty_spawn", "pty_wait", "pty_write"]);
  for (const t of Object.values(hooks.tool)) assert.equal(typeof t.execute, "function");
  assert.deepEqual(Object.keys(tools.pty_read.args).sort(), ["id", "ignoreCase", "limit", "offset", "pattern"]);
  assert.deepEqual(Object.keys(tools.pty_spawn.args).sort(), ["args", "command", "description", "env", "notifyOnExit", "shellIntegration", "title", "workdir"]);
  assert.deepEqual(Object.keys(tools.pty_screen.args).sort(), ["id", "scrollback"]);
});

test("a scripted agent: server, curl, vim, a failing test, Ctrl-C, nothing left", async () => {
  // 1. A dev server, detached; wait for its "Serving HTTP" line.
  const port = await freePort();
  const spawned = await call("pty_spawn", { command: "python3", args: ["-u", "-m", "http.server", String(port), "--bind", "127.0.0.1"], description: "HTTP server for the test", title: "http.server" });
  assert.match(spawned, /<pty_spawned>[\s\S]*Status: running/);
  const server = idOf(spawned);
  const serving = await call("pty_wait", { id: server, pattern: "Serving HTTP", timeoutSeconds: 30 });
  assert.match(serving, /Condition: text \(matched\)/);
  assert.match(serving, /Serving HTTP on 127\.0\.0\.1 port \d+/);

  // 2. Fetch a page from a second terminal; the server's log shows the request.
  const curl = idOf(await call("pty_spawn", { command: "curl", args: ["-s", "-o", "/dev/null", "-w", "%{http_code}\\n", `http://127.0.0.1:${port}/`], description: "fetch the index page" }));
  const fetched = await call("pty_wait", { id: curl, timeoutSeconds: 30 });
  assert.match(fetched, /Exit: 0/);
  assert.match(fetched, /\| 200$/m);
  const requestSeen = await call("pty_wait", { id: server, pattern: '"GET / HTTP/1\\.1" 200', timeoutSeconds: 30 });
  assert.match(requestSeen, /\(matched\)/);
  const log = await call("pty_read", { id: server, pattern: "GET /" });
  assert.match(log, /<pty_output id="pty_[0-9a-f]{32}" status="running" pattern="GET \/">/);
  assert.match(log, /"GET \/ HTTP\/1\.1" 200/);
  assert.match(log, /\(1 match from \d+ total lines\)/);

  // 3. Edit a file in vim: read its screen, type, read it again, save, quit; the file holds
  // the text. Each look at the screen follows a pty_wait for what vim draws (a screen covers
  // every byte written before it was asked for), then waits for vim's redraws to settle.
  const file = path.join(workdir, "notes.txt");
  const vim = idOf(await call("pty_spawn", { command: "vim", args: ["-u", "NONE", "-N", "-n", file], description: "edit notes.txt" }));
  await call("pty_wait", { id: vim, pattern: "notes\\.txt", timeoutSeconds: 30 });
  const opened = await screenShowing(vim, [
    /^ 2\| ~$/m, // vim marks the lines past the end of the buffer
    /^40\| "[^"]*notes\.txt" \[New( File)?\]$/m, // and says the file is new, at the bottom
    /\| Cursor: row 1, col 1 \|/, // visible, at the start of the buffer
  ]);
  assert.match(opened, new RegExp(`^<pty_screen id="${vim}" status="running">\n`));
  assert.match(opened, /^Size: 120x40 \| Cursor: row 1, col 1 \| Alternate screen: yes \(a full-screen program\)\n/m);
  assert.match(opened, /^ 1\|\n 2\| ~\n/m, "the empty buffer's one line");
  assert.equal(opened.match(/^ ?\d+\| ~$/gm).length, 38, "rows 2 to 39 are past the end of the buffer");
  assert.match(opened, /<\/pty_screen>$/);
  assert.match(await call("pty_write", { id: vim, data: "ihello from the agent\\x1b" }), /^Sent 22 bytes/);
  await call("pty_wait", { id: vim, pattern: "hello from the agent", timeoutSeconds: 30 });
  const typed = await screenShowing(vim, [/^ 1\| hello from the agent$/m, /^\(row 40 is empty\)$/m]); // after Escape, "-- INSERT --" is gone
  assert.match(typed, /^ 2\| ~$/m);
  assert.doesNotMatch(typed, /-- INSERT --/);
  await call("pty_write", { id: vim, data: ":wq\\r" });
  const edited = await call("pty_wait", { id: vim, timeoutSeconds: 30 });
  assert.match(edited, /Exit: 0/);
  assert.equal(fs.readFileSync(file, "utf8"), "hello from the agent\n");

  // 4. A failing test command: its exit status, and the notification to the opencode session.
  const notification = new Promise((resolve) => (notified = resolve));
  const failing = idOf(await call("pty_spawn", { command: "sh", args: ["-c", "echo 'running 2 tests'; echo 'FAIL test_parse'; exit 3"], description: "run the test suite", notifyOnExit: true }));
  const failed = await call("pty_wait", { id: failing, timeoutSeconds: 30 });
  assert.match(failed, /Status: exited/);
  assert.match(failed, /Exit: 3/);
  assert.match(await call("pty_read", { id: failing }), /00002\| FAIL test_parse/);
  await notification;
  assert.equal(notifications.length, 1);
  assert.equal(notifications[0].sessionId, "ses_scripted_agent");
  assert.match(notifications[0].text, /<pty_exited>[\s\S]*Exit Code: 3[\s\S]*Last Line: FAIL test_parse/);

  // 5. Ctrl-C to the server; wait for its exit.
  await call("pty_write", { id: server, data: "\\x03" });
  const stopped = await call("pty_wait", { id: server, timeoutSeconds: 30 });
  assert.match(stopped, /Status: exited/);
  assert.match(stopped, /Keyboard interrupt received/);

  // 6. Nothing is left running.
  const list = await call("pty_list", {});
  assert.match(list, /Total: \d+ session\(s\)/);
  assert.doesNotMatch(list, /Status: running/);
  for (const id of [server, curl, vim, failing]) assert.ok(list.includes(`[${id}]`), `${id} listed`);
});

test("errors an agent can act on", async () => {
  await assert.rejects(call("pty_read", { id: "pty_" + "0".repeat(32) }), /not found\. Use pty_list/);
  await assert.rejects(call("pty_write", { id: "nonsense", data: "x" }), /not a PTY session ID/);
  const done = idOf(await call("pty_spawn", { command: "true", description: "exits at once" }));
  await call("pty_wait", { id: done, timeoutSeconds: 30 });
  await assert.rejects(call("pty_write", { id: done, data: "x" }), /session status is 'exited'/);
  const sleeper = idOf(await call("pty_spawn", { command: "sleep", args: ["60"], description: "runs until killed" }));
  assert.match(await call("pty_wait", { id: sleeper, timeoutSeconds: 0.2 }), /<pty_wait_timeout>/);
  const killed = await call("pty_kill", { id: sleeper, cleanup: true });
  assert.match(killed, /Killed: pty_[0-9a-f]{32} \(session removed\)/);
  assert.match(await call("pty_list", {}), new RegExp(`\\[${sleeper}\\][\\s\\S]*?Status: killed`));
});

test("pty_screen: scrollback, a title, a short screen; and its errors", async () => {
  const printer = idOf(await call("pty_spawn", { command: "sh", args: ["-c", "printf '\\033]2;counting\\007'; seq 1 50; printf 'done'; exec sleep 60"], description: "prints 50 lines" }));
  await call("pty_wait", { id: printer, pattern: "done", timeoutSeconds: 30 });
  const screen = await call("pty_screen", { id: printer, scrollback: 5 });
  // 40 rows: 1..50 and "done" fill 51 rows, so 11 lines scrolled off: the newest 5 asked for.
  assert.match(screen, /^Size: 120x40 \| Cursor: row 40, col 5 \| Alternate screen: no \| Title: "counting"$/m);
  assert.match(screen, /^Scrollback \(5 lines above the screen, oldest first\):\n {2}\| 7\n {2}\| 8\n {2}\| 9\n {2}\| 10\n {2}\| 11\nScreen \(rows numbered from 1\):\n 1\| 12\n/m);
  assert.match(screen, /^40\| done\n<\/pty_screen>$/m);
  await call("pty_kill", { id: printer });

  const short = idOf(await call("pty_spawn", { command: "sh", args: ["-c", "printf 'one line'; exec sleep 60"], description: "prints one line" }));
  await call("pty_wait", { id: short, pattern: "one line", timeoutSeconds: 30 });
  const one = await call("pty_screen", { id: short });
  assert.match(one, /^ 1\| one line\n\(rows 2-40 are empty\)\n<\/pty_screen>$/m);
  assert.doesNotMatch(one, /Scrollback/);
  await call("pty_kill", { id: short });

  await assert.rejects(call("pty_screen", { id: "pty_" + "0".repeat(32) }), /not found\. Use pty_list/);
  await assert.rejects(call("pty_screen", { id: "nonsense" }), /not a PTY session ID/);
});

test("pty_exec: a new shell, exit codes, the directory kept, condensed output, an input wait", async () => {
  const first = await call("pty_exec", { command: "cd /usr && printf '\\033[1mbold\\033[0m\\n'" });
  const shell = idOf(first);
  assert.match(first, /^State: exited\nExit code: 0\n/m);
  assert.match(first, /^Output:\nbold\n<\/pty_exec>$/m, "escape sequences stripped");
  assert.match(await call("pty_exec", { id: shell, command: "pwd" }), /^Directory: \/usr\nOutput:\n\/usr\n/m);
  assert.match(await call("pty_exec", { id: shell, command: "(exit 7)" }), /^Exit code: 7$/m);

  // 10000 numbered lines, 58894 bytes with \r\n (and what the shell writes around the command
  // in its output range): a 200-byte budget shows 100 of head and of tail.
  const long = await call("pty_exec", { id: shell, command: "seq 1 10000", maxOutputBytes: 200 });
  const marker = /^\[\.\.\. (\d+) bytes left out: log offsets (\d+) to (\d+) \(pty_read shows the whole log\) \.\.\.\]$/m.exec(long);
  assert.ok(marker, long);
  assert.ok(Number(marker[1]) >= 58894 - 200, long);
  assert.equal(Number(marker[3]) - Number(marker[2]), Number(marker[1]));
  assert.match(long, /^Output:\n1\n2\n3\n/m);
  assert.match(long, /\n9999\n10000\n<\/pty_exec>$/);

  const asking = await call("pty_exec", { id: shell, command: "read -r -p 'name? ' name; echo hi $name" });
  assert.match(asking, /^State: waiting_for_input$/m);
  assert.match(asking, /^Output:\nname\? /m);
  await call("pty_write", { id: shell, data: "bob\\r" });
  assert.match(await call("pty_wait", { id: shell, pattern: "hi bob", timeoutSeconds: 30 }), /Condition: text \(matched\)/);
  assert.match(await call("pty_wait", { id: shell, forInput: true, timeoutSeconds: 30 }), /Condition: input/);

  const plain = idOf(await call("pty_spawn", { command: "sleep", args: ["60"], description: "no shell" }));
  await assert.rejects(call("pty_exec", { id: plain, command: "true" }), /reports no commands/);
  await call("pty_kill", { id: plain });
  await call("pty_kill", { id: shell });
});
