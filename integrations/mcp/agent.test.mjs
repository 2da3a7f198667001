// A scripted agent: each step is one tool call, as a model would make it.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, chmodSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { connect, readAll, screen, screenUntil, tool, toolError } from "./mcp-client.mjs";

let client;
const dir = mkdtempSync(path.join(tmpdir(), "ptyvisor-mcp-agent-"));
chmodSync(dir, 0o755);
writeFileSync(path.join(dir, "hello.txt"), "hello over http\n");
const started = [];

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

async function start(args) {
  const r = await tool(client, "terminal_start", { cwd: dir, ...args });
  assert.match(r.id, /^[0-9a-f]{32}$/);
  started.push(r.id);
  return r.id;
}

before(async () => {
  client = await connect();
});

after(async () => {
  await client?.close();
});

let server;
let port;

test("1. a dev server starts detached and says it serves", async () => {
  port = await freePort();
  server = await start({ command: `exec python3 -m http.server ${port} --bind 127.0.0.1` });
  const w = await tool(client, "terminal_wait", { id: server, pattern: "Serving HTTP", timeout_ms: 20000 });
  assert.equal(w.reason, "text");
  assert.equal(w.matched, true);
  assert.equal(w.state, "running");
  const { text } = await readAll(client, server);
  assert.match(text, /Serving HTTP on 127\.0\.0\.1 port \d+/);
});

test("2. curl in a second terminal; the server's log shows the request", async () => {
  const curl = await start({ argv: ["curl", "-sS", `http://127.0.0.1:${port}/hello.txt`] });
  const w = await tool(client, "terminal_wait", { id: curl, timeout_ms: 20000 });
  assert.equal(w.reason, "exit");
  assert.equal(w.exit.code, 0);
  const { text, last } = await readAll(client, curl);
  assert.match(text, /hello over http/);
  assert.equal(last.state, "exited");

  // Only what came since the last read: the request's line, not "Serving HTTP" again.
  await tool(client, "terminal_wait", { id: server, pattern: "GET /hello.txt", timeout_ms: 20000 });
  const log = await readAll(client, server);
  assert.match(log.text, /"GET \/hello\.txt HTTP\/1\.1" 200/);
  assert.doesNotMatch(log.text, /Serving HTTP/);
  assert.doesNotMatch(log.text, /\x1b/, "escape sequences are stripped");
});

test("3. vim: open a file, type, save; cat shows it", async () => {
  const file = path.join(dir, "notes.txt");
  const vim = await start({ argv: ["vim", "-n", "-u", "NONE", "-i", "NONE", "notes.txt"], cols: 80, rows: 24 });
  // vim is ready once it has drawn its screen and gone quiet.
  await tool(client, "terminal_wait", { id: vim, pattern: "notes\\.txt", timeout_ms: 20000 });
  await tool(client, "terminal_wait", { id: vim, quiet_ms: 300, timeout_ms: 20000 });
  await tool(client, "terminal_write", { id: vim, text: "iwritten by an agent through MCP", keys: ["Escape"] });
  // The screen, as a person would look at it: vim on the alternate screen, the text on the
  // first row, the cursor on its last character once Escape has left insert mode.
  const typedText = "written by an agent through MCP";
  const shown = await screenUntil(
    client,
    { id: vim },
    (s) => s.lines[0] === typedText && s.cursor.row === 0 && s.cursor.col === typedText.length - 1,
  );
  assert.equal(shown.screen.alternate, true);
  assert.equal(shown.screen.cols, 80);
  assert.equal(shown.screen.rows, 24);
  assert.equal(shown.screen.lines[1], "~");
  assert.match(shown.text, /^alternate screen: yes/m);
  assert.match(shown.text, /^ 0\|written by an agent through MCP$/m);
  assert.match(shown.text, /^ 1\|~$/m);
  assert.match(shown.text, /^cursor: row 0, col 30$/m);
  const typed = await tool(client, "terminal_write", { id: vim, text: ":wq", keys: ["Enter"] });
  assert.equal(typed.bytes, 4);
  const w = await tool(client, "terminal_wait", { id: vim, timeout_ms: 20000 });
  assert.equal(w.reason, "exit");
  assert.equal(w.exit.code, 0);
  assert.equal(readFileSync(file, "utf8"), "written by an agent through MCP\n");

  const cat = await start({ argv: ["cat", "notes.txt"] });
  await tool(client, "terminal_wait", { id: cat, timeout_ms: 20000 });
  const { text } = await readAll(client, cat);
  assert.equal(text, "written by an agent through MCP\n");
});

test("4. a failing test command: its output and exit status", async () => {
  const t = await start({ command: "echo 'FAIL: test_addition (expected 4, got 5)'; exit 3" });
  const w = await tool(client, "terminal_wait", { id: t, timeout_ms: 20000 });
  assert.equal(w.reason, "exit");
  assert.equal(w.state, "exited");
  assert.equal(w.exit.status, "exited");
  assert.equal(w.exit.code, 3);
  const { text, last } = await readAll(client, t);
  assert.equal(text, "FAIL: test_addition (expected 4, got 5)\n");
  assert.equal(last.exit.code, 3);
  assert.equal(last.more, false);
  assert.equal(last.next_offset, last.end);
});

test("resize: the program sees the new size", async () => {
  const sh = await start({ command: "read line; stty size", cols: 80, rows: 24 });
  const r = await tool(client, "terminal_resize", { id: sh, cols: 100, rows: 30 });
  assert.deepEqual(r, { id: sh, cols: 100, rows: 30 });
  await tool(client, "terminal_write", { id: sh, keys: ["Enter"] });
  await tool(client, "terminal_wait", { id: sh, timeout_ms: 20000 });
  const { text } = await readAll(client, sh);
  assert.match(text, /^30 100$/m);
  const gone = await toolError(client, "terminal_resize", { id: sh, cols: 90, rows: 20 });
  assert.match(gone, /exited|ended/);
});

test("resize is refused, saying why, while someone is attached as controller", async () => {
  const id = await start({ argv: ["cat"] });
  // A person's `ptyvisor attach`: its output shows the marker once it is attached.
  const attach = spawn(process.env.PTYVISOR_BIN, ["attach", id], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => attach.on("exit", resolve));
  let seen = "";
  const attached = new Promise((resolve) =>
    attach.stdout.on("data", (d) => {
      seen += d;
      if (seen.includes("attach-marker")) resolve();
    }),
  );
  await tool(client, "terminal_write", { id, text: "attach-marker", keys: ["Enter"] });
  await attached;
  const message = await toolError(client, "terminal_resize", { id, cols: 100, rows: 30 });
  assert.match(message, /attached to this session as its controller/);
  attach.kill("SIGTERM");
  await exited;
  const ended = await tool(client, "terminal_kill", { id });
  assert.equal(ended.state, "exited");
});

test("terminal_screen shows text where the program put it, with cursor, title and colours", async () => {
  // Clear the screen, set the title, write at three places (the second one bold red); the
  // last thing written is "ready", so once it is out the screen is complete.
  const id = await start({
    command:
      "printf '\\033[2J\\033[H\\033]2;screen test\\007\\033[3;5H\\033[1;31mhello\\033[0m" +
      "\\033[6;1Hsixth row\\033[5;10Hready'; exec cat",
    cols: 80,
    rows: 24,
  });
  await tool(client, "terminal_wait", { id, pattern: "ready", timeout_ms: 20000 });
  const { text, screen: s } = await screen(client, { id, attributes: true });
  assert.equal(s.id, id);
  assert.equal(s.cols, 80);
  assert.equal(s.rows, 24);
  assert.equal(s.lines.length, 24);
  assert.equal(s.lines[2], "    hello");
  assert.equal(s.lines[4], "         ready");
  assert.equal(s.lines[5], "sixth row");
  for (const row of [0, 1, 3, 6, 23]) assert.equal(s.lines[row], "", `row ${row} is blank`);
  assert.deepEqual(s.cursor, { row: 4, col: 14, visible: true });
  assert.equal(s.title, "screen test");
  assert.equal(s.alternate, false);
  assert.deepEqual(s.scrollback, []);
  assert.deepEqual(s.attributes, [{ row: 2, col: 4, width: 5, bold: true, fg: 1 }]);
  const { last } = await readAll(client, id);
  assert.equal(s.offset, last.end, "the screen shows every byte written so far");
  // What the model reads.
  assert.equal(
    text,
    [
      "size: 80 cols x 24 rows",
      "cursor: row 4, col 14",
      "alternate screen: no",
      'title: "screen test"',
      `offset: ${s.offset}`,
      " 0|",
      " 1|",
      " 2|    hello",
      " 3|",
      " 4|         ready",
      " 5|sixth row",
      "(rows 6-23 are blank)",
      "attributes (row,col xwidth: style; colours are palette numbers or #rrggbb):",
      "2,4 x5: bold fg=1",
      "",
    ].join("\n"),
  );
  await tool(client, "terminal_kill", { id });
});

test("terminal_screen: lines that scrolled off come with scrollback, oldest first", async () => {
  const id = await start({ command: "seq 1 30; exec cat", cols: 20, rows: 10 });
  await tool(client, "terminal_wait", { id, pattern: "30\r\n", timeout_ms: 20000 });
  const { text, screen: s } = await screen(client, { id, scrollback: 3 });
  // 30 lines and the cursor's empty row on 10 rows: 1..21 scrolled off.
  assert.deepEqual(s.lines, ["22", "23", "24", "25", "26", "27", "28", "29", "30", ""]);
  assert.deepEqual(s.scrollback, ["19", "20", "21"]);
  assert.deepEqual(s.cursor, { row: 9, col: 0, visible: true });
  assert.equal(s.attributes, undefined, "attributes only when asked");
  assert.match(text, /^-3\|19\n-2\|20\n-1\|21\n 0\|22\n/m);
  assert.match(text, /^ 8\|30\n\(row 9 is blank\)\n$/m);
  await tool(client, "terminal_kill", { id });
});

test("terminal_screen of an unknown session is a tool error from the daemon", async () => {
  const message = await toolError(client, "terminal_screen", { id: "0123456789abcdef0123456789abcdef" });
  assert.match(message, /no_such_session/);
});

test("5. C-c stops the server; it exits", async () => {
  const sent = await tool(client, "terminal_write", { id: server, keys: ["C-c"] });
  assert.equal(sent.bytes, 1);
  const w = await tool(client, "terminal_wait", { id: server, timeout_ms: 20000 });
  assert.equal(w.reason, "exit");
  assert.equal(w.state, "exited");
  const { text } = await readAll(client, server);
  assert.match(text, /Keyboard interrupt received/);
});

test("kill ends a session and reports how", async () => {
  const sleeper = await start({ argv: ["sleep", "600"] });
  const k = await tool(client, "terminal_kill", { id: sleeper, signal: "TERM" });
  assert.equal(k.id, sleeper);
  const w = await tool(client, "terminal_wait", { id: sleeper, timeout_ms: 20000 });
  assert.equal(w.exit.status, "signaled");
  assert.equal(w.exit.signal, 15);
  const other = await start({ argv: ["sleep", "600"] });
  const ended = await tool(client, "terminal_kill", { id: other });
  assert.equal(ended.state, "exited");
});

test("output read in small pieces comes out whole: no sequence or character is cut", async () => {
  const lines = 1500;
  const program =
    "import sys\n" +
    `for i in range(${lines}): print(f"\\x1b[1;3{i % 8}mline {i} caf\\u00e9 \\u20ac \\U0001F600\\x1b[0m")\n`;
  const id = await start({ argv: ["python3", "-c", program], env: { PYTHONIOENCODING: "utf-8" } });
  const w = await tool(client, "terminal_wait", { id, timeout_ms: 20000 });
  assert.equal(w.exit.code, 0);
  const expected = Array.from({ length: lines }, (_, i) => `line ${i} caf\u00e9 \u20ac \u{1F600}\n`).join("");

  // Stripped, paging through the whole log in order (`to`), continuing where each read stopped.
  let text = "";
  let reads = 0;
  for (let more = true; more; reads++) {
    const r = await tool(client, "terminal_read", { id, max_bytes: 1000, to: w.offset });
    assert.equal(r.dropped_bytes, 0);
    text += r.text;
    more = r.more;
  }
  // Pages of at most 1000 bytes of text, each ending at a line's end.
  assert.ok(reads >= Math.ceil(Buffer.byteLength(expected) / 1000), `${reads} reads`);
  assert.equal(text, expected);

  // Raw, from explicit offsets: the escape sequences stay, characters are never split.
  let raw = "";
  for (let offset = 0, more = true; more; ) {
    const r = await tool(client, "terminal_read", { id, offset, to: w.offset, max_bytes: 777, strip_ansi: false });
    assert.equal(r.offset, offset);
    raw += r.text;
    offset = r.next_offset;
    more = r.more || r.next_offset < r.end;
  }
  assert.doesNotMatch(raw, /\uFFFD/);
  assert.equal(raw.replace(/\x1b\[[0-9;]*m/g, "").replace(/\r\n/g, "\n"), expected);
});

test("long noisy output: progress collapses, the middle is left out and can be paged through", async () => {
  const program =
    "import sys\n" +
    "for p in range(101): sys.stdout.write(f'\\r\\x1b[Kbuilding {p}%'); sys.stdout.flush()\n" +
    "print()\n" +
    "for i in range(3000): print(f'test {i} ok')\n";
  const id = await start({ argv: ["python3", "-c", program] });
  const w = await tool(client, "terminal_wait", { id, timeout_ms: 20000 });
  assert.equal(w.exit.code, 0);
  const expected = "building 100%\n" + Array.from({ length: 3000 }, (_, i) => `test ${i} ok\n`).join("");

  const r = await tool(client, "terminal_read", { id, max_bytes: 4096 });
  assert.ok(r.text.length <= 4096, `${r.text.length} bytes`);
  assert.equal(r.truncated, true);
  assert.ok(r.text.startsWith("building 100%\ntest 0 ok\n"), r.text.slice(0, 100));
  assert.ok(r.text.endsWith("test 2999 ok\n"));
  assert.equal(r.next_offset, w.offset);
  const marker = r.text.match(/^\[\.\.\. (\d+) bytes omitted .* offset=(\d+) to=(\d+) \.\.\.\]\n/m);
  assert.ok(marker, r.text);
  assert.deepEqual([Number(marker[1]), Number(marker[2]), Number(marker[3])], [r.omitted_bytes, r.omitted_from, r.omitted_to]);

  let middle = "";
  for (let offset = r.omitted_from, more = true; more; ) {
    const page = await tool(client, "terminal_read", { id, offset, to: r.omitted_to, max_bytes: 4096 });
    assert.equal(page.truncated, false);
    middle += page.text;
    offset = page.next_offset;
    more = offset < r.omitted_to;
  }
  assert.equal(middle.length, r.omitted_bytes);
  assert.equal(r.text.replace(marker[0], middle), expected);
});

test("6. the list shows every session, none left running", async () => {
  const { sessions } = await tool(client, "terminal_list");
  const ids = sessions.map((s) => s.id);
  for (const id of started) assert.ok(ids.includes(id), `${id} is listed`);
  const running = sessions.filter((s) => s.state !== "exited");
  assert.deepEqual(running, []);
});
