// The page's wording of sessions (assets/format.js), without a browser.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { age, commandLine, exitText } from '../assets/format.js';

test('a command line quotes only the words that need it', () => {
  assert.equal(commandLine(['make', '-j2', 'check']), 'make -j2 check');
  assert.equal(commandLine(['sh', '-c', 'echo "hi"; exit 3']), `sh -c 'echo "hi"; exit 3'`);
  assert.equal(commandLine(['printf', "it's"]), `printf 'it'\\''s'`);
  assert.equal(commandLine(['']), "''");
});

test('ages read in the largest units that matter', () => {
  assert.equal(age(-3), '0s');
  assert.equal(age(59.9), '59s');
  assert.equal(age(125), '2m');
  assert.equal(age(3 * 3600 + 7 * 60), '3h 7m');
  assert.equal(age(2 * 86400 + 5 * 3600), '2d 5h');
});

test('an exit says code, or signal and core dump', () => {
  assert.equal(exitText(null), '');
  assert.equal(exitText({ status: 'exited', code: 0, reason: 'exited' }), 'exit 0');
  assert.equal(exitText({ status: 'signaled', signal: 9, core_dumped: false }), 'signal 9');
  assert.equal(exitText({ status: 'signaled', signal: 11, core_dumped: true }), 'signal 11 (core dumped)');
  assert.equal(exitText({ status: 'unknown' }), 'ended');
});
