// Sandbox profiles (protocol version 6, section 13) against the real daemon, configured by
// test/daemon-extra.toml: "roomy" and "short" (runtime_max = 1) are allowed, "forbidden" is
// not; and against fake daemons: one that speaks only up to version 5, one whose LIST carries
// profiles and usage, one that relays version 5 notices. No test sleeps: each waits for the
// event it needs (the 1 s runtime limit is the daemon's).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Client, encodeFrame, FrameType, ProtocolError, PtyvisorError, ServerError, spawn, UnsupportedVersionError } from "ptyvisor";

const client = new Client();

async function listed(id, c = client) {
  return (await c.list()).find((s) => s.id === id);
}

test("a start with an allowed profile lists its profile", async () => {
  const { id } = await client.start(["sleep", "60"], { profile: "roomy" });
  try {
    const entry = await listed(id);
    assert.equal(entry.profile, "roomy");
    // Which figures a host counts depends on its cgroups (13.3): an object when any is known.
    assert.ok(entry.usage === null || typeof entry.usage === "object");
  } finally {
    await client.kill(id);
  }
});

test("a start without a profile lists none", async () => {
  const { id } = await client.start(["sleep", "60"]);
  try {
    assert.equal((await listed(id)).profile, null);
  } finally {
    await client.kill(id);
  }
});

for (const name of ["forbidden", "no-such-profile"]) {
  test(`a forbidden profile is ServerError profile_not_allowed (${name})`, async () => {
    // An unknown name and a forbidden one get the same answer (13.1), naming the allowed ones.
    await assert.rejects(client.start(["true"], { profile: name }), (e) => {
      assert.ok(e instanceof ServerError, e.stack);
      assert.equal(e.code, "profile_not_allowed");
      assert.match(e.serverMessage, /roomy/);
      return true;
    });
  });
}

test("open() with a forbidden profile is profile_not_allowed too", async () => {
  await assert.rejects(client.open(["true"], { profile: "forbidden" }), (e) => e instanceof ServerError && e.code === "profile_not_allowed");
});

test("a profile name out of bounds is refused before anything is sent", async () => {
  for (const bad of ["", "x".repeat(65), 7]) {
    await assert.rejects(client.start(["true"], { profile: bad }), (e) => e instanceof PtyvisorError && !(e instanceof ServerError));
  }
});

test("runtime_max ends an open session with reason runtime-limit (a version 6 connection)", async () => {
  const session = await client.open(["sleep", "60"], { profile: "short" });
  const exit = await session.exited;
  assert.equal(exit.reason, "runtime-limit");
});

test("runtime_max ends a node-pty style spawn, whose session says runtime-limit", async () => {
  const term = spawn("sleep", ["60"], { profile: "short" });
  const exitEvent = new Promise((resolve) => term.onExit(resolve));
  await term.ready;
  const exit = await term.session.exited;
  assert.equal(exit.reason, "runtime-limit");
  assert.equal((await exitEvent).signal, exit.signal ?? 0);
});

test("runtime_max is reason timeout to an older connection (WAIT speaks version 2)", async () => {
  const { id } = await client.start(["sleep", "60"], { profile: "short" });
  const waited = await client.wait(id, { timeoutMs: 30000 });
  assert.equal(waited.reason, "exit");
  assert.equal(waited.exit.reason, "timeout");
  assert.equal((await listed(id)).profile, "short");
});

/** A fake daemon on a fresh socket: answers each connection's first bytes with answer(chunk). */
async function fakeDaemon(answer) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ptyvisor-fake-daemon-"));
  const socketPath = path.join(dir, "fake.sock");
  const requests = [];
  const server = net.createServer((socket) => {
    socket.once("data", (chunk) => {
      requests.push(chunk);
      socket.end(answer(chunk));
    });
    socket.on("error", () => {});
  });
  await new Promise((resolve) => server.listen(socketPath, resolve));
  return {
    client: new Client({ socketPath }),
    socketPath,
    requests,
    close: () => new Promise((resolve) => server.close(() => fs.rm(dir, { recursive: true }, resolve))),
  };
}

const json = (body) => Buffer.from(JSON.stringify(body));
const ID = "0123456789abcdef0123456789abcdef";
const STARTED = { id: ID, unit: `ptyvisor-${ID}.service`, pid: 1 };

/** Version and JSON of a START a fake daemon read. */
function startRequest(chunk) {
  assert.equal(chunk[3], FrameType.START);
  return { version: chunk[2], body: JSON.parse(chunk.subarray(8, 8 + chunk.readUInt32BE(4)).toString()) };
}

test("a daemon without version 6: a named profile is UnsupportedVersionError, and no profile keeps the older version", async () => {
  const daemon = await fakeDaemon((chunk) =>
    chunk[2] > 5
      ? encodeFrame(FrameType.ERROR, json({ code: "unsupported_version", message: `version ${chunk[2]} is not spoken here` }), 1)
      : encodeFrame(FrameType.STARTED, json(STARTED), 1),
  );
  const refused = (e) => {
    assert.ok(e instanceof UnsupportedVersionError, e.stack);
    assert.equal(e.version, 6);
    assert.match(e.message, /^the daemon does not offer sandbox profiles/);
    assert.match(e.message, /version 6 is not spoken here/);
    return true;
  };
  try {
    await assert.rejects(daemon.client.start(["true"], { profile: "p" }), refused);
    await assert.rejects(daemon.client.open(["true"], { profile: "p" }), refused);
    await assert.rejects(spawn("true", [], { socketPath: daemon.socketPath, profile: "p" }).ready, refused);
    assert.equal((await daemon.client.start(["true"])).id, ID);
    const requests = daemon.requests.map(startRequest);
    assert.deepEqual(requests.map((r) => r.version), [6, 6, 6, 2]);
    assert.deepEqual(requests.map((r) => r.body.profile), ["p", "p", "p", undefined]);
  } finally {
    await daemon.close();
  }
});

test("LIST's profile and usage are typed; malformed ones are ProtocolError", async () => {
  const entry = { id: ID, unit: "u", argv: ["sh"], cwd: "/", state: "running", exit: null, pid: 1, start: 0, offset: 0, clients: 0, created: 1 };
  const replies = [
    [{ ...entry, profile: "build", usage: { cpu_usec: 1500, memory_peak: 4096, tasks_peak: 3, oom_kills: 0, a_later_figure: 9 } }, entry],
    [{ ...entry, profile: 3 }],
    [{ ...entry, usage: [1] }],
    [{ ...entry, usage: { cpu_usec: -1 } }],
    [{ ...entry, usage: { memory_peak: "4096" } }],
    [{ ...entry, usage: { tasks_peak: 1.5 } }],
  ];
  let next = 0;
  const daemon = await fakeDaemon(() => encodeFrame(FrameType.SESSIONS, json({ sessions: replies[next++] })));
  try {
    const [profiled, bare] = await daemon.client.list();
    assert.equal(profiled.profile, "build");
    assert.deepEqual(profiled.usage, { cpuUsec: 1500, memoryPeak: 4096, tasksPeak: 3, oomKills: 0 });
    assert.equal(bare.profile, null);
    assert.equal(bare.usage, null);
    for (let i = 1; i < replies.length; i++) await assert.rejects(daemon.client.list(), ProtocolError);
  } finally {
    await daemon.close();
  }
});

test("a version 6 session relays CONTROLLER and REFUSED as events, then the new EXIT reason", async () => {
  const daemon = await fakeDaemon(() =>
    Buffer.concat([
      encodeFrame(FrameType.STARTED, json(STARTED), 6),
      encodeFrame(FrameType.CONTROLLER, json({ controller: "supervisor", uid: 0, since: 5, you: false }), 6),
      encodeFrame(FrameType.REFUSED, json({ code: "held_by_supervisor", message: "", what: "input", count: 3 }), 6),
      encodeFrame(FrameType.EXIT, json({ status: "signaled", signal: 15, core_dumped: false, reason: "idle-timeout" }), 6),
    ]),
  );
  try {
    const session = daemon.client.openNow(daemon.client.connectStart(["sleep", "60"], { profile: "idle" }));
    const controllers = [];
    const refusals = [];
    session.on("controller", (info) => controllers.push(info));
    session.on("refused", (info) => refusals.push(info));
    const exit = await session.exited;
    assert.equal(exit.reason, "idle-timeout");
    assert.deepEqual(controllers, [{ controller: "supervisor", uid: 0, since: 5, you: false }]);
    assert.deepEqual(refusals, [{ code: "held_by_supervisor", what: "input", count: 3, message: "" }]);
  } finally {
    await daemon.close();
  }
});

test("a version 5 notice in an older connection is a ProtocolError", async () => {
  const daemon = await fakeDaemon(() =>
    Buffer.concat([encodeFrame(FrameType.STARTED, json(STARTED), 2), encodeFrame(FrameType.CONTROLLER, json({ controller: "agent", since: 0, you: true }), 5)]),
  );
  try {
    // STARTED and the notice may come in one read: the open() or the session's end fails.
    await assert.rejects(async () => (await daemon.client.open(["true"])).exited, (e) => e instanceof ProtocolError && e.wireError === "unsupported_version");
  } finally {
    await daemon.close();
  }
});
