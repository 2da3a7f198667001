// The session calls against the real daemon: start detached, attach, list, read, wait, kill,
// send, the typed errors, and cancellation.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, ConnectError, resolveSocketPath, ServerError, shellStatus } from "ptyvisor";

const client = new Client();
const NO_SUCH_ID = "0".repeat(32);

async function collect(session) {
  const chunks = [];
  for await (const chunk of session) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

test("PTYVISOR_SOCKET names the socket", () => {
  assert.equal(resolveSocketPath(), process.env.PTYVISOR_SOCKET);
  assert.equal(client.socketPath, process.env.PTYVISOR_SOCKET);
});

test("a detached session: wait for a line, read the log, list it, kill it", async () => {
  const { id, pid } = await client.start(["sh", "-c", "echo server listening on 8080; exec sleep 60"]);
  assert.match(id, /^[0-9a-f]{32}$/);
  assert.ok(pid > 0);
  const waited = await client.wait(id, { for: "text", pattern: "listening on \\d+", timeoutMs: 10000 });
  assert.equal(waited.matched, true);
  assert.equal(waited.reason, "text");
  assert.ok(waited.matchEnd > waited.matchStart);
  const log = await client.read(id);
  assert.match(log.data.toString(), /server listening on 8080/);
  assert.equal(log.offset, 0);
  assert.equal(log.state, "running");
  const listed = (await client.list()).find((s) => s.id === id);
  assert.ok(listed, "the session is listed");
  assert.deepEqual(listed.argv, ["sh", "-c", "echo server listening on 8080; exec sleep 60"]);
  assert.equal(listed.detached, true);
  const killed = await client.kill(id);
  assert.equal(killed.state, "exited");
  assert.equal(killed.exit.reason, "stopped");
});

test("read from an offset, and max_bytes", async () => {
  const { id } = await client.start(["printf", "0123456789"]);
  await client.wait(id, { timeoutMs: 10000 });
  const part = await client.read(id, { from: 3, maxBytes: 4 });
  assert.equal(part.data.toString(), "3456");
  assert.equal(part.offset, 3);
  assert.equal(part.more, true);
  assert.equal(part.end, 10);
});

test("wait for exit reports the status; shellStatus turns it into one number", async () => {
  const { id } = await client.start(["sh", "-c", "exit 7"]);
  const waited = await client.wait(id, { for: "exit", timeoutMs: 10000 });
  assert.equal(waited.reason, "exit");
  assert.equal(waited.exit.status, "exited");
  assert.equal(waited.exit.code, 7);
  assert.equal(shellStatus(waited.exit), 7);
});

test("wait for quiet, and a wait that times out", async () => {
  const { id } = await client.start(["sh", "-c", "echo burst; exec sleep 60"]);
  const quiet = await client.wait(id, { for: "quiet", quietMs: 200, timeoutMs: 10000 });
  assert.equal(quiet.reason, "quiet");
  const timedOut = await client.wait(id, { for: "text", pattern: "never printed", timeoutMs: 100 });
  assert.equal(timedOut.matched, false);
  assert.equal(timedOut.reason, "timeout");
  await client.kill(id);
});

test("send writes input without attaching", async () => {
  const { id } = await client.start(["sh", "-c", 'read line; echo "got:$line"']);
  assert.equal(await client.send(id, "hello\r"), 6);
  const waited = await client.wait(id, { for: "text", pattern: "got:hello", timeoutMs: 10000 });
  assert.equal(waited.matched, true);
  const end = await client.wait(id, { timeoutMs: 10000 });
  assert.equal(end.exit.code, 0);
});

test("attach as controller replays from the start, takes input, and stops", async () => {
  const { id } = await client.start(["sh", "-c", 'echo first; while read l; do echo "echo:$l"; done']);
  await client.wait(id, { for: "text", pattern: "first", timeoutMs: 10000 });
  const session = await client.attach(id, { from: "start" });
  assert.equal(session.role, "controller");
  assert.equal(session.attachedInfo.offset, 0);
  const output = collect(session);
  session.write("ping\r");
  const seen = await client.wait(id, { for: "text", pattern: "echo:ping", timeoutMs: 10000 });
  assert.equal(seen.matched, true);
  session.stop();
  const exit = await session.exited;
  assert.equal(exit.reason, "stopped");
  const text = await output;
  assert.match(text, /^first\r\n/);
  assert.match(text, /echo:ping/);
});

test("an observer sees the output and the exit; its input is refused", async () => {
  const { id } = await client.start(["sh", "-c", "read x; echo observed-$x"]);
  const observer = await client.attach(id, { role: "observer", from: "start" });
  assert.equal(observer.role, "observer");
  const output = collect(observer);
  await client.send(id, "yes\r");
  const exit = await observer.exited;
  assert.equal(exit.status, "exited");
  assert.match(await output, /observed-yes/);

  const { id: id2 } = await client.start(["sleep", "60"]);
  const intruder = await client.attach(id2, { role: "observer" });
  intruder.write("no\r");
  await assert.rejects(intruder.exited, (e) => e instanceof ServerError && e.code === "not_allowed");
  await client.kill(id2);
});

test("detach leaves the session running; attach again takes it over", async () => {
  const session = await client.open(["sh", "-c", "echo up; exec sleep 60"]);
  assert.match(session.id, /^[0-9a-f]{32}$/);
  await client.wait(session.id, { for: "text", pattern: "up", timeoutMs: 10000 });
  const offset = await session.detach();
  assert.ok(offset >= 0);
  const listed = (await client.list()).find((s) => s.id === session.id);
  assert.equal(listed.state, "running");
  assert.equal(listed.detached, true);
  const again = await client.attach(session.id, { from: "start" });
  const detached = new Promise((resolve) => again.once("detached", resolve));
  const second = await client.attach(session.id, { takeover: true });
  assert.equal((await detached).reason, "taken_over");
  second.stop();
  assert.equal((await second.exited).reason, "stopped");
});

test("a bound session ends when its connection closes", async () => {
  const session = await client.open(["sleep", "60"]);
  const observer = await client.attach(session.id, { role: "observer" });
  session.close();
  const exit = await observer.exited;
  assert.notEqual(exit.reason, "exited");
  assert.equal((await client.list()).find((s) => s.id === session.id && s.state !== "exited"), undefined);
});

test("kill with a signal returns at once; the exit says which signal", async () => {
  const { id } = await client.start(["sleep", "60"]);
  const killed = await client.kill(id, { signal: "SIGTERM" });
  assert.equal(killed.id, id);
  const waited = await client.wait(id, { timeoutMs: 10000 });
  assert.equal(waited.exit.status, "signaled");
  assert.equal(waited.exit.signal, 15);
  assert.equal(shellStatus(waited.exit), 143);
});

test("a large output arrives whole and in order", async () => {
  const session = await client.open(["seq", "1", "200000"]);
  const text = await collect(session);
  const lines = text.split("\r\n").filter(Boolean);
  assert.equal(lines.length, 200000);
  assert.equal(lines[0], "1");
  assert.equal(lines[199999], "200000");
  assert.equal((await session.exited).code, 0);
});

test("a slow iterator and a 'data' listener see the same bytes, 'exit' after the last of them", async () => {
  // The pump hands over every frame already received in one turn; an iterator that lags must
  // still stop it (at its high-water mark) and lose nothing, and 'exit' must come last.
  const session = await client.open(["seq", "1", "100000"]);
  const heard = [];
  let exitedAfter = -1;
  session.on("data", (chunk) => heard.push(chunk));
  session.on("exit", () => (exitedAfter = heard.length));
  const iterated = [];
  for await (const chunk of session) {
    iterated.push(chunk);
    await new Promise((resolve) => setImmediate(resolve)); // a consumer slower than the socket
  }
  const text = Buffer.concat(iterated).toString("utf8");
  assert.equal(text.split("\r\n").filter(Boolean).length, 100000);
  assert.ok(text.endsWith("99999\r\n100000\r\n"));
  assert.deepEqual(Buffer.concat(heard), Buffer.concat(iterated));
  assert.equal(exitedAfter, heard.length, "'exit' came after every 'data'");
  assert.equal((await session.exited).code, 0);
});

test("errors carry the protocol's codes", async () => {
  await assert.rejects(client.wait(NO_SUCH_ID), (e) => e instanceof ServerError && e.code === "no_such_session");
  await assert.rejects(client.read(NO_SUCH_ID), (e) => e instanceof ServerError && e.code === "no_such_session");
  await assert.rejects(client.start(["/nonexistent/command"]), (e) => e instanceof ServerError && e.code === "start_failed");
  const { id } = await client.start(["true"]);
  await client.wait(id, { timeoutMs: 10000 });
  await assert.rejects(client.send(id, "x"), (e) => e instanceof ServerError && e.code === "session_ended");
  await assert.rejects(new Client({ socketPath: "/nonexistent/ptyvisor.sock" }).list(), (e) => e instanceof ConnectError && e.code === "ENOENT");
});

test("an AbortSignal cancels a wait; the session is untouched", async () => {
  const { id } = await client.start(["sleep", "60"]);
  const controller = new AbortController();
  const waiting = client.wait(id, { timeoutMs: 60000, signal: controller.signal });
  controller.abort();
  await assert.rejects(waiting, (e) => e.name === "AbortError");
  const listed = (await client.list()).find((s) => s.id === id);
  assert.equal(listed.state, "running");
  await client.kill(id);
});
