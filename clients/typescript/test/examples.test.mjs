// The README's examples, run as a user runs them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const examples = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "examples");

// The example passes its environment to the session: without NODE_TEST_CONTEXT, the suite it
// runs does not take itself for a child of this one.
const { NODE_TEST_CONTEXT: _context, ...env } = process.env;

function run(script, args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(examples, script), ...args], { timeout: 60000, env }, (error, stdout, stderr) =>
      resolve({ code: error ? error.code : 0, stdout, stderr }),
    );
  });
}

test("agent-run-tests: runs a suite in a session and reports its failure", async () => {
  const fixture = path.join(examples, "fixtures", "sample.test.mjs");
  const { code, stdout } = await run("agent-run-tests.mjs", ["/usr/bin/node", "--test", "--test-reporter=tap", fixture]);
  assert.match(stdout, /^session [0-9a-f]{32}: /);
  assert.match(stdout, /# pass 1/);
  assert.match(stdout, /# fail 1/);
  assert.match(stdout, /exit status 1/);
  assert.equal(code, 1);
});

test("drive-repl: types into a Python REPL and reads the answers", async () => {
  const { code, stdout, stderr } = await run("drive-repl.mjs", []);
  assert.equal(code, 0, stderr);
  assert.match(stdout, /6 \* 7 = 42/);
  assert.match(stdout, /python major version: 3/);
  assert.match(stdout, /the REPL exited: exited 0/);
});
