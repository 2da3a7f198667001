// Protocol version 4 against the real daemon (docs/protocol.md, section 11): exec() in bash
// and zsh started with shell integration, compared with `sh -c` run here; commands(), the new
// WAIT conditions, LIST's new members, and watch(). Then, against a fake daemon of version 3,
// each new call's UnsupportedVersionError. No test sleeps: each waits for the event it needs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Client, encodeFrame, FrameType, ServerError, UnsupportedVersionError, Watch } from "ptyvisor";

const client = new Client();
const TIMEOUT = 20000;

/** What `sh -c cmd` writes to stdout here, and its status: the reference for exec(). */
function reference(cmd) {
  const r = spawnSync("sh", ["-c", cmd], { encoding: "buffer", maxBuffer: 8 << 20 });
  return { text: r.stdout.toString("utf8"), status: r.status };
}

async function shell(name) {
  const { id } = await client.start([name], { shellIntegration: true, cwd: os.tmpdir() });
  // The first prompt: exec() would wait for it too, but the tests of the prompt want it known.
  const prompt = await client.wait(id, { for: "prompt", timeoutMs: TIMEOUT });
  assert.equal(prompt.reason, "prompt");
  return id;
}

for (const name of ["bash", "zsh"]) {
  test(`${name}: exec matches sh -c for status and output`, async () => {
    const id = await shell(name);
    try {
      const unicode = "printf 'h\\303\\251llo w\\303\\266rld \\342\\234\\223\\n'";
      for (const cmd of ["true", "false", "(exit 7)", "printf abc", unicode, "printf 'a\\nb\\n\\nc'", "seq 1 5"]) {
        const want = reference(cmd);
        const got = await client.exec(id, cmd, { timeoutMs: TIMEOUT });
        assert.equal(got.state, "exited", cmd);
        assert.equal(got.exitCode, want.status, cmd);
        assert.equal(got.text, want.text, cmd);
        assert.equal(got.truncated, false, cmd);
        assert.equal(got.record.command, cmd);
        assert.equal(got.record.exitCode, want.status);
        assert.equal(got.seq, got.record.seq);
        assert.equal(got.sessionState, "running");
        assert.equal(got.output.length, got.record.outputEnd - got.record.outputStart, cmd);
      }
      assert.match((await client.exec(id, unicode)).text, /héllo wörld ✓/);
    } finally {
      await client.kill(id);
    }
  });

  test(`${name}: cd then pwd, and the record's cwd`, async () => {
    const id = await shell(name);
    try {
      const cd = await client.exec(id, "cd /usr/share", { timeoutMs: TIMEOUT });
      assert.equal(cd.exitCode, 0);
      assert.equal(cd.record.cwd, fs.realpathSync(os.tmpdir()));
      const pwd = await client.exec(id, "pwd", { timeoutMs: TIMEOUT });
      assert.equal(pwd.text, "/usr/share\n");
      assert.equal(pwd.record.cwd, "/usr/share");
      assert.equal(pwd.seq, cd.seq + 1);
    } finally {
      await client.kill(id);
    }
  });

  test(`${name}: 1 MiB of output is read back whole, paging through LOG, and maxOutputBytes keeps the head`, async () => {
    const id = await shell(name);
    try {
      const cmd = "head -c 1048576 /dev/zero | tr '\\0' x; seq 1 3";
      const want = reference(cmd);
      const got = await client.exec(id, cmd, { timeoutMs: TIMEOUT });
      assert.equal(got.exitCode, 0);
      assert.equal(got.text.length, want.text.length);
      assert.equal(got.text, want.text);
      const head = await client.exec(id, "seq 1 1000", { maxOutputBytes: 10 });
      assert.equal(head.truncated, true);
      assert.equal(head.output.toString(), "1\r\n2\r\n3\r\n4");
      assert.equal(head.text, "1\n2\n3\n4");
    } finally {
      await client.kill(id);
    }
  });

  test(`${name}: a command reading a line is waiting_for_input; send() answers, wait for the command ends it`, async () => {
    const id = await shell(name);
    try {
      const got = await client.exec(id, "read -r line; echo got:$line", { timeoutMs: TIMEOUT });
      assert.equal(got.state, "waiting_for_input");
      assert.equal(got.exitCode, null);
      assert.equal(got.record.outputEnd, null);
      const listed = (await client.list()).find((s) => s.id === id);
      assert.equal(listed.waitingForInput, true);
      assert.equal(listed.atPrompt, false);
      assert.equal(typeof listed.waitingSince, "number");
      assert.equal(listed.lastCommand.seq, got.seq);
      assert.equal(listed.lastCommand.exitCode, null);
      assert.equal(await client.send(id, "x\r"), 2);
      const waited = await client.wait(id, { for: "command", after: got.seq - 1, timeoutMs: TIMEOUT });
      assert.equal(waited.reason, "command");
      assert.equal(waited.matched, true);
      assert.equal(waited.command.seq, got.seq);
      assert.equal(waited.command.exitCode, 0);
      const out = await client.read(id, { from: waited.command.outputStart, maxBytes: waited.command.outputEnd - waited.command.outputStart });
      assert.match(out.data.toString(), /got:x\r\n$/);
    } finally {
      await client.kill(id);
    }
  });

  test(`${name}: timeout leaves the command running; interrupt ends it with 130`, async () => {
    const id = await shell(name);
    try {
      const timedOut = await client.exec(id, "sleep 100", { timeoutMs: 300 });
      assert.equal(timedOut.state, "timeout");
      assert.equal(timedOut.exitCode, null);
      assert.equal(timedOut.record.command, "sleep 100");
      assert.equal(timedOut.record.outputEnd, null);
      await client.send(id, "\x03");
      const ended = await client.wait(id, { for: "command", after: timedOut.seq - 1, timeoutMs: TIMEOUT });
      assert.equal(ended.command.seq, timedOut.seq);
      assert.equal(ended.command.exitCode, 130);
      const interrupted = await client.exec(id, "sleep 100", { timeoutMs: 300, interrupt: true });
      assert.equal(interrupted.state, "interrupted");
      assert.equal(interrupted.exitCode, 130);
      assert.equal(interrupted.seq, timedOut.seq + 1);
    } finally {
      await client.kill(id);
    }
  });

  test(`${name}: a second exec while one runs is busy; watch() sees the command's start and end`, async () => {
    const id = await shell(name);
    const watch = client.watch(id);
    try {
      await watch.ready;
      const events = watch[Symbol.asyncIterator]();
      // The daemon's Ctrl-C ends it: one sent from here at command_start could reach the shell
      // before it has started the command (the C mark precedes the fork).
      const running = client.exec(id, "sleep 100", { timeoutMs: 2000, interrupt: true });
      const start = (await events.next()).value;
      assert.equal(start.event, "command_start");
      assert.equal(start.command.command, "sleep 100");
      await assert.rejects(client.exec(id, "true"), (e) => e instanceof ServerError && e.code === "busy");
      const result = await running;
      assert.equal(result.state, "interrupted");
      assert.equal(result.exitCode, 130);
      const end = (await events.next()).value;
      assert.equal(end.event, "command_end");
      assert.equal(end.command.seq, start.command.seq);
      assert.equal(end.command.exitCode, 130);
      assert.equal((await events.next()).value.event, "prompt");
    } finally {
      watch.close();
      await client.kill(id);
    }
  });

  test(`${name}: commands() lists the records, since filters them; list() shows the shell at its prompt`, async () => {
    const id = await shell(name);
    try {
      const first = await client.exec(id, "true");
      await client.exec(id, "(exit 3)");
      // EXECUTED answers at the command's end (its D mark); the prompt (A, B) follows it.
      assert.equal((await client.wait(id, { for: "prompt", timeoutMs: TIMEOUT })).reason, "prompt");
      const all = await client.commands(id);
      assert.equal(all.shell, name);
      assert.equal(all.atPrompt, true);
      assert.equal(all.current, null);
      assert.equal(all.firstSeq, first.seq);
      assert.deepEqual(all.commands.map((c) => [c.command, c.exitCode]), [["true", 0], ["(exit 3)", 3]]);
      const since = await client.commands(id, { since: first.seq });
      assert.deepEqual(since.commands.map((c) => c.command), ["(exit 3)"]);
      const input = await client.wait(id, { for: "input", timeoutMs: TIMEOUT });
      assert.equal(input.reason, "input");
      const listed = (await client.list()).find((s) => s.id === id);
      assert.equal(listed.shell, name);
      assert.equal(listed.atPrompt, true);
      assert.equal(listed.lastCommand.command, "(exit 3)");
      assert.equal(listed.lastCommand.exitCode, 3);
    } finally {
      await client.kill(id);
    }
  });
}

test("watch(): an input wait, a command_end through on(), and the exit that ends it", async () => {
  const id = await shell("bash");
  const watch = client.watch(id);
  const ends = [];
  const inputs = [];
  watch.on("command_end", (e) => ends.push(e.command.command));
  watch.on("input", (e) => inputs.push(e));
  const exited = new Promise((resolve) => watch.on("exit", resolve));
  await watch.ready;
  const reading = await client.exec(id, "read -r line", { timeoutMs: TIMEOUT });
  assert.equal(reading.state, "waiting_for_input");
  await client.send(id, "x\r");
  await client.wait(id, { for: "command", after: reading.seq - 1, timeoutMs: TIMEOUT });
  await client.send(id, "exit 4\r");
  const exit = await exited;
  assert.equal(exit.exit.status, "exited");
  assert.equal(exit.exit.code, 4);
  await watch.done;
  assert.equal(ends[0], "read -r line");
  assert.ok(inputs.length >= 1, "the read's wait for input is an event");
  assert.ok(inputs.every((e) => typeof e.sinceMs === "number"));
});

test("watch(): iteration yields the exit last and ends; break closes the watch", async () => {
  const id = await shell("bash");
  const watch = client.watch(id);
  await watch.ready;
  await client.send(id, "exit 0\r");
  const seen = [];
  for await (const event of watch) seen.push(event.event);
  assert.equal(seen.at(-1), "exit");

  const other = await shell("zsh");
  try {
    const second = client.watch(other);
    await second.ready;
    const run = client.exec(other, "true");
    for await (const event of second) {
      assert.equal(event.event, "command_start");
      break;
    }
    await second.done; // over, without the session's exit
    assert.equal((await run).exitCode, 0);
  } finally {
    await client.kill(other);
  }
});

test("without shell integration: exec is no_shell_integration, LIST's new members are absent", async () => {
  const { id } = await client.start(["sh", "-c", "exec sleep 60"]);
  try {
    await assert.rejects(client.exec(id, "true"), (e) => e instanceof ServerError && e.code === "no_shell_integration");
    const listed = (await client.list()).find((s) => s.id === id);
    assert.equal(listed.shell, null);
    assert.equal(listed.atPrompt, false);
    assert.equal(listed.lastCommand, null);
    const watch = client.watch("0".repeat(32));
    await assert.rejects(watch.done, (e) => e instanceof ServerError && e.code === "no_such_session");
  } finally {
    await client.kill(id);
  }
});

test("a start with shell integration refuses a command that is not bash or zsh", async () => {
  await assert.rejects(client.start(["sh", "-c", "true"], { shellIntegration: true }), (e) => e instanceof ServerError && e.code === "bad_frame");
});

/** A daemon of version 3 on a fresh socket: refuses any frame of a newer version as section 8 says. */
async function daemonOfVersion3() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ptyvisor-v3-daemon-"));
  const socketPath = path.join(dir, "v3.sock");
  const versions = [];
  const server = net.createServer((socket) => {
    socket.once("data", (chunk) => {
      versions.push(chunk[2]);
      const body = Buffer.from(JSON.stringify({ code: "unsupported_version", message: `version ${chunk[2]} is not spoken here` }));
      socket.end(encodeFrame(FrameType.ERROR, body, 1));
    });
    socket.on("error", () => {});
  });
  await new Promise((resolve) => server.listen(socketPath, resolve));
  return {
    client: new Client({ socketPath }),
    versions,
    close: () => new Promise((resolve) => server.close(() => fs.rm(dir, { recursive: true }, resolve))),
  };
}

test("a daemon of version 3: each version 4 call is UnsupportedVersionError naming its feature", async () => {
  const daemon = await daemonOfVersion3();
  const ID = "0123456789abcdef0123456789abcdef";
  const refused = (feature) => (e) => {
    assert.ok(e instanceof UnsupportedVersionError, e.stack);
    assert.equal(e.version, 4);
    assert.match(e.message, new RegExp(`^the daemon does not offer ${feature.replace(/[()]/g, "\\$&")}`));
    assert.match(e.message, /version 4 is not spoken here/);
    return true;
  };
  try {
    await assert.rejects(daemon.client.exec(ID, "true"), refused("exec (commands in a shell)"));
    await assert.rejects(daemon.client.commands(ID), refused("command records"));
    await assert.rejects(daemon.client.wait(ID, { for: "command", after: 2 }), refused("waiting for a command"));
    await assert.rejects(daemon.client.wait(ID, { for: "input" }), refused("waiting for input"));
    await assert.rejects(daemon.client.start(["bash"], { shellIntegration: true }), refused("shell integration"));
    const watch = daemon.client.watch(ID);
    assert.ok(watch instanceof Watch);
    await assert.rejects(watch.done, refused("session events (WATCH)"));
    assert.deepEqual(daemon.versions, [4, 4, 4, 4, 4, 4]);
  } finally {
    await daemon.close();
  }
});
