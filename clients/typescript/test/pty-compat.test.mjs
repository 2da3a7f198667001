// The same tests, run against node-pty's implementation (@lydell/node-pty) and against
// ptyvisor's spawn(): code written for node-pty's IPty switches by changing its import.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import * as ptyvisor from "ptyvisor";

const implementations = [["ptyvisor", ptyvisor.spawn]];
if (globalThis.Bun) {
  // node-pty's write() needs Node's tty streams (Bun has bun-pty for that); the reference runs
  // under Node, and under Bun this shows as skipped, never as passed.
  describe("@lydell/node-pty", () => test.skip("node-pty does not work under Bun; the reference runs under Node"));
} else try {
  const nodePty = await import("@lydell/node-pty");
  implementations.push(["@lydell/node-pty", nodePty.spawn ?? nodePty.default.spawn]);
} catch (e) {
  // Not silently: a missing reference shows as a skipped suite, never as a pass.
  describe("@lydell/node-pty", () => test.skip(`not loadable here: ${e.message}`));
}

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/", LANG: "C.UTF-8" };

/** Collects output until the exit event; resolves {out, exit}. */
function runToExit(term) {
  let out = "";
  term.onData((d) => (out += d));
  return new Promise((resolve) => term.onExit((exit) => resolve({ out, exit })));
}

/** Resolves once the output so far matches `re`. */
function outputMatching(term, re) {
  let out = "";
  return new Promise((resolve) => {
    const sub = term.onData((d) => {
      out += d;
      if (re.test(out)) {
        sub.dispose();
        resolve(out);
      }
    });
  });
}

for (const [name, spawn] of implementations) {
  describe(`IPty: ${name}`, () => {
    test("output, exit code 0, pid", async () => {
      const term = spawn("sh", ["-c", "echo hello from the terminal"], { name: "xterm", cols: 80, rows: 24, cwd: "/", env });
      const { out, exit } = await runToExit(term);
      assert.match(out, /hello from the terminal\r\n/);
      assert.equal(exit.exitCode, 0);
      assert.ok(term.pid > 0, `pid ${term.pid}`);
      assert.equal(term.process, "sh");
    });

    test("a non-zero exit code", async () => {
      const term = spawn("sh", ["-c", "exit 3"], { cwd: "/", env });
      const { exit } = await runToExit(term);
      assert.equal(exit.exitCode, 3);
    });

    test("cwd, env and TERM from the options", async () => {
      const term = spawn("sh", ["-c", 'pwd; echo "foo=$FOO term=$TERM"'], { name: "xterm-256color", cwd: "/tmp", env: { ...env, FOO: "bar" } });
      const { out } = await runToExit(term);
      assert.match(out, /^\/tmp\r\n/m);
      assert.match(out, /foo=bar term=xterm-256color/);
    });

    test("write reaches the program; the terminal echoes it", async () => {
      const term = spawn("sh", ["-c", 'read line; echo "got:$line"'], { cwd: "/", env });
      const done = runToExit(term);
      term.write("typed text\r");
      const { out, exit } = await done;
      assert.match(out, /got:typed text/);
      assert.equal(exit.exitCode, 0);
    });

    test("resize changes the terminal's size", async () => {
      // The program waits after printing: node-pty may drop output that arrives as the
      // program exits, so the size is read before the second line ends it.
      const term = spawn("sh", ["-c", "read x; stty size; read y"], { cols: 80, rows: 24, cwd: "/", env });
      const done = runToExit(term);
      const size = outputMatching(term, /\d+ \d+\r\n/);
      term.resize(100, 30);
      assert.equal(term.cols, 100);
      assert.equal(term.rows, 30);
      term.write("\r");
      assert.match(await size, /30 100/);
      term.write("\r");
      const { exit } = await done;
      assert.equal(exit.exitCode, 0);
    });

    test("kill sends a signal; onExit reports it", async () => {
      const term = spawn("sh", ["-c", "echo ready; exec sleep 30"], { cwd: "/", env });
      const done = runToExit(term);
      await outputMatching(term, /ready/);
      term.kill("SIGTERM");
      const { exit } = await done;
      assert.equal(exit.signal, 15);
    });

    test("a disposed onData listener gets nothing more", async () => {
      const term = spawn("sh", ["-c", "echo one; read x; echo two"], { cwd: "/", env });
      let seen = "";
      const sub = term.onData((d) => (seen += d));
      const done = runToExit(term);
      await outputMatching(term, /one/);
      sub.dispose();
      const before = seen;
      term.write("\r");
      const { out } = await done;
      assert.match(out, /two/);
      assert.equal(seen, before);
    });
  });
}
