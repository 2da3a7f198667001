// snapshot() (protocol section 10) against the real daemon: real programs draw on the session's
// terminal, the test waits for their output to arrive ('data'), then asks for the screen. A
// screen covers every byte the session wrote before the SNAPSHOT arrived, so it covers what
// this connection has already received: no sleeping, no retrying. Then, against a fake daemon
// on a socket of the test's own, what a daemon of version 2 and a malformed SCREEN give.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import {
  Client,
  encodeFrame,
  FrameType,
  ProtocolError,
  PtyvisorError,
  Screen,
  SCREEN_PROTOCOL_VERSION,
  ServerError,
  spawn,
  UnsupportedVersionError,
} from "ptyvisor";

const client = new Client();
const NO_SUCH_ID = "0".repeat(32);

/** Opens a bound session and resolves once its output holds `expected` (the session runs on). */
async function openUntil(argv, expected, options = {}) {
  const session = await client.open(argv, options);
  let seen = Buffer.alloc(0);
  await new Promise((resolve, reject) => {
    const onData = (chunk) => {
      seen = Buffer.concat([seen, chunk]);
      if (seen.includes(expected)) {
        session.off("data", onData);
        resolve();
      }
    };
    session.on("data", onData);
    session.exited.then((exit) => reject(new Error(`exited (${exit.reason}) before printing ${JSON.stringify(expected)}`)), reject);
  });
  return session;
}

/** Takes the session's screen, and checks it covers every byte this connection has received. */
async function screenOf(session, options) {
  const screen = await session.snapshot(options);
  assert.ok(screen instanceof Screen);
  assert.equal(screen.id, session.id);
  assert.ok(screen.offset >= session.offset, `the screen covers offset ${screen.offset}, ${session.offset} bytes received`);
  return screen;
}

async function stop(session) {
  session.stop();
  await session.exited;
}

test("text placed by cursor moves: rows, trailing spaces removed, the cursor after it", async () => {
  const session = await openUntil(["sh", "-c", "printf '\\033[2J\\033[Hhello\\033[3;5Hworld'; exec sleep 60"], "world", { cols: 80, rows: 24 });
  const screen = await screenOf(session);
  assert.equal(screen.cols, 80);
  assert.equal(screen.rows, 24);
  assert.equal(screen.lines.length, 24);
  assert.equal(screen.lines[0], "hello");
  assert.equal(screen.lines[1], "");
  assert.equal(screen.lines[2], "    world");
  assert.deepEqual(screen.lines.slice(3), Array(21).fill(""));
  assert.deepEqual(screen.cursor, { row: 2, col: 9, visible: true });
  assert.equal(screen.alternate, false);
  assert.equal(screen.title, "");
  assert.deepEqual(screen.scrollback, []);
  assert.equal(screen.attributes, undefined, "attributes only when asked for");
  assert.equal(screen.text(), `hello\n\n    world\n${"\n".repeat(21)}`);
  // The same through the client, by id.
  assert.deepEqual((await client.snapshot(session.id)).lines, screen.lines);
  await stop(session);
});

test("the title set by OSC 2, and a cursor hidden by CSI ? 25 l", async () => {
  const session = await openUntil(["sh", "-c", "printf '\\033]2;build: 3 of 7\\007\\033[?25lready'; exec sleep 60"], "ready");
  const screen = await screenOf(session);
  assert.equal(screen.title, "build: 3 of 7");
  assert.equal(screen.cursor.visible, false);
  assert.equal(screen.lines[0], "ready");
  await stop(session);
});

test("the alternate screen (tput smcup), and the main one back after rmcup", async () => {
  const script = "printf 'on the main screen\\n'; tput smcup; printf 'on the alternate'; read answer; tput rmcup; printf 'back'; exec sleep 60";
  const session = await openUntil(["sh", "-c", script], "on the alternate", { term: "xterm-256color" });
  const alternate = await screenOf(session);
  assert.equal(alternate.alternate, true);
  assert.ok(alternate.lines.some((l) => l.includes("on the alternate")), alternate.text());
  assert.ok(!alternate.lines.some((l) => l.includes("on the main screen")), "the main screen is hidden");

  let after = "";
  const back = new Promise((resolve) => session.on("data", (chunk) => (after += chunk) && after.includes("back") && resolve()));
  session.write("\r");
  await back;
  const main = await screenOf(session);
  assert.equal(main.alternate, false);
  assert.equal(main.lines[0], "on the main screen");
  assert.ok(!main.lines.some((l) => l.includes("on the alternate")), main.text());
  assert.match(main.lines[1], /back$/);
  await stop(session);
});

test("attributes: bold red text is one run; plain text is in none", async () => {
  const session = await openUntil(["sh", "-c", "printf '\\033[1;31mRED\\033[0m plain \\033[4;48;2;16;32;48mX\\033[0m'; exec sleep 60"], "X");
  const screen = await screenOf(session, { attributes: true });
  assert.equal(screen.lines[0], "RED plain X");
  assert.deepEqual(screen.attributes, [
    { row: 0, col: 0, width: 3, bold: true, fg: 1 },
    { row: 0, col: 10, width: 1, underline: 1, bg: "#102030" },
  ]);
  await stop(session);
});

test("scrollback after seq 1 100 in a 24-row terminal", async () => {
  const session = await openUntil(["sh", "-c", "seq 1 100; exec sleep 60"], "100\r\n", { rows: 24, cols: 80 });
  const visible = Array.from({ length: 23 }, (_, i) => String(78 + i));
  const plain = await screenOf(session);
  assert.deepEqual(plain.lines, [...visible, ""]);
  assert.deepEqual(plain.cursor, { row: 23, col: 0, visible: true });
  assert.deepEqual(plain.scrollback, [], "no scrollback unless asked for");

  const all = await screenOf(session, { scrollback: 1000 });
  assert.deepEqual(all.scrollback, Array.from({ length: 77 }, (_, i) => String(i + 1)), "oldest first, ending just above row 0");
  assert.deepEqual(all.lines, plain.lines);
  assert.equal(all.text(), `${Array.from({ length: 100 }, (_, i) => i + 1).join("\n")}\n\n`);

  const newest = await screenOf(session, { scrollback: 10 });
  assert.deepEqual(newest.scrollback, ["68", "69", "70", "71", "72", "73", "74", "75", "76", "77"]);
  await stop(session);
});

test("a node-pty-style spawn() has snapshot() too", async () => {
  const term = spawn("sh", ["-c", "printf 'one\\ntwo'; exec sleep 60"], { cols: 40, rows: 10 });
  await new Promise((resolve) => {
    let out = "";
    const sub = term.onData((d) => {
      out += d;
      if (out.includes("two")) {
        sub.dispose();
        resolve();
      }
    });
  });
  const screen = await term.snapshot();
  assert.equal(screen.cols, 40);
  assert.equal(screen.rows, 10);
  assert.deepEqual(screen.lines.slice(0, 3), ["one", "two", ""]);
  assert.deepEqual(screen.cursor, { row: 1, col: 3, visible: true });
  const exited = new Promise((resolve) => term.onExit(resolve));
  term.kill("SIGTERM");
  assert.equal((await exited).signal, 15);
});

test("errors: an unknown id, a malformed id, a scrollback out of bounds", async () => {
  await assert.rejects(client.snapshot(NO_SUCH_ID), (e) => e instanceof ServerError && e.code === "no_such_session");
  await assert.rejects(client.snapshot("not-an-id"), (e) => e instanceof PtyvisorError && /not a session id/.test(e.message));
  await assert.rejects(client.snapshot(NO_SUCH_ID, { scrollback: 10001 }), (e) => e instanceof PtyvisorError && /0\.\.10000/.test(e.message));
  await assert.rejects(client.snapshot(NO_SUCH_ID, { scrollback: 1.5 }), (e) => e instanceof PtyvisorError && /0\.\.10000/.test(e.message));
});

/**
 * A daemon of the test's own on a fresh socket: reads the first frame, records it, and
 * answers with the bytes `answer(header, body)` returns, then closes.
 */
async function fakeDaemon(answer) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ptyvisor-fake-daemon-"));
  const socketPath = path.join(dir, "fake.sock");
  const requests = [];
  const server = net.createServer((socket) => {
    let got = Buffer.alloc(0);
    socket.on("data", (chunk) => {
      got = Buffer.concat([got, chunk]);
      if (got.length < 8 || got.length < 8 + got.readUInt32BE(4)) return;
      const header = { version: got[2], type: got[3] };
      const body = JSON.parse(got.subarray(8, 8 + got.readUInt32BE(4)).toString());
      requests.push({ ...header, body });
      socket.end(answer(header, body));
    });
  });
  await new Promise((resolve) => server.listen(socketPath, resolve));
  return {
    client: new Client({ socketPath }),
    requests,
    close: () => new Promise((resolve) => server.close(() => fs.rm(dir, { recursive: true }, resolve))),
  };
}

const json = (body) => Buffer.from(JSON.stringify(body));
const ID = "0123456789abcdef0123456789abcdef";

test("a daemon of version 2 refuses the SNAPSHOT's version: UnsupportedVersionError", async () => {
  // Section 8: a server that does not speak the header's version answers ERROR
  // unsupported_version in a version 1 frame, and closes.
  const daemon = await fakeDaemon((header) =>
    header.version > 2
      ? encodeFrame(FrameType.ERROR, json({ code: "unsupported_version", message: `version ${header.version} is not spoken here` }), 1)
      : encodeFrame(FrameType.ERROR, json({ code: "internal", message: "unexpected" }), 1),
  );
  try {
    await assert.rejects(daemon.client.snapshot(ID, { scrollback: 5, attributes: true }), (e) => {
      assert.ok(e instanceof UnsupportedVersionError, e.stack);
      assert.ok(e instanceof ServerError, "an UnsupportedVersionError is a ServerError");
      assert.equal(e.code, "unsupported_version");
      assert.equal(e.version, 3);
      assert.match(e.message, /^the daemon does not offer screen snapshots/);
      assert.match(e.message, /version 3 is not spoken here/);
      return true;
    });
    assert.deepEqual(daemon.requests, [{ version: SCREEN_PROTOCOL_VERSION, type: FrameType.SNAPSHOT, body: { id: ID, scrollback: 5, attributes: true } }]);
  } finally {
    await daemon.close();
  }
});

test("a SCREEN that breaks section 10.3 is a ProtocolError", async () => {
  const good = {
    id: ID,
    cols: 10,
    rows: 3,
    cursor: { row: 0, col: 0, visible: true },
    alternate: false,
    title: "",
    offset: 7,
    lines: ["a", "b", ""],
    scrollback: [],
  };
  const cases = [
    [{}, null],
    [{ lines: ["a", "b"] }, /2 lines for 3 rows/],
    [{ cursor: { row: 3, col: 0, visible: true } }, /cursor.*"row"/],
    [{ cursor: { row: 0, col: 10, visible: true } }, /cursor.*"col"/],
    [{ cursor: { row: 0, col: 0, visible: 1 } }, /"visible"/],
    [{ cols: 0 }, /"cols"/],
    [{ cols: 2000, rows: 1000, lines: Array(1000).fill("") }, /more than 1000000/],
    [{ lines: ["a", "\u001b[31mb", ""] }, /lines\[1\] holds a control character/],
    [{ scrollback: ["too", "many"] }, /2 lines of scrollback, 0 asked for/],
    [{ title: 7 }, /"title"/],
    [{ id: "f".repeat(32) }, /not the session asked for/],
    [{ offset: -1 }, /"offset"/],
    [{ alternate: "no" }, /"alternate"/],
  ];
  for (const [change, error] of cases) {
    const daemon = await fakeDaemon(() => encodeFrame(FrameType.SCREEN, json({ ...good, ...change }), 3));
    try {
      if (error === null) {
        const screen = await daemon.client.snapshot(ID);
        assert.deepEqual(screen.lines, ["a", "b", ""], "the unchanged reply is accepted");
      } else {
        await assert.rejects(daemon.client.snapshot(ID), (e) => e instanceof ProtocolError && error.test(e.message), JSON.stringify(change));
      }
    } finally {
      await daemon.close();
    }
  }
  const runs = [
    [[{ row: 0, col: 0, width: 11, bold: true }], /"width"/],
    [[{ row: 0, col: 2, width: 1, bold: true }, { row: 0, col: 1, width: 1, bold: true }], /overlaps or comes before/],
    [[{ row: 0, col: 0, width: 1, fg: 256 }], /"fg"/],
    [[{ row: 0, col: 0, width: 1, bg: "red" }], /"bg"/],
    [[{ row: 0, col: 0, width: 1, underline: 4 }], /"underline"/],
    [[{ row: 0, col: 0, width: 1, bold: false }], /"bold" is present but not true/],
  ];
  for (const [attributes, error] of runs) {
    const daemon = await fakeDaemon(() => encodeFrame(FrameType.SCREEN, json({ ...good, attributes }), 3));
    try {
      await assert.rejects(daemon.client.snapshot(ID, { attributes: true }), (e) => e instanceof ProtocolError && error.test(e.message), JSON.stringify(attributes));
    } finally {
      await daemon.close();
    }
  }
  // Attributes asked for but missing.
  const missing = await fakeDaemon(() => encodeFrame(FrameType.SCREEN, json(good), 3));
  try {
    await assert.rejects(missing.client.snapshot(ID, { attributes: true }), (e) => e instanceof ProtocolError && /"attributes" is missing/.test(e.message));
  } finally {
    await missing.close();
  }
});
