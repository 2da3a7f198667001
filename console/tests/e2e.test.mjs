// The console end to end: chromium → the page → `ptyvisor web` (as nobody, a supervisor or an
// observer) → a real ptyvisord → sessions the agent (the test account) started. Run through
// console/test.sh, which starts the daemon; outside it every test fails (requireEnv).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { launch, openConsole, openLive, pane, paneText, row, status, typeInto, visible, waitForText } from './browser.mjs';
import { agent, rawGet, requireEnv, startSession, startWeb } from './harness.mjs';

const shots = process.env.CONSOLE_SCREENSHOTS;  // a directory: screenshots of the real thing
const screenshot = async (page, name) => { if (shots) await page.screenshot({ path: join(shots, `console-e2e-${name}.png`) }); };

// A session that answers each line it reads: "got:LINE", or its terminal size for "size".
// It proves which input reached the session (the terminal echo alone would not: it is the
// PTY's, but only for input that reached the PTY, which is what the tests need to rule out).
const TAG = `t${process.pid}`;
const echoer = (tag) => ['sh', '-c',
  'echo "ready-$0"; while IFS= read -r line; do case "$line" in size) echo "size:$(stty size)";; *) echo "got:$line";; esac; done', tag];

let browser;
before(async () => { requireEnv(); browser = await launch(); });
after(async () => { await browser?.close(); });

const waitStatus = (page, id, prefix) => page.waitForFunction((sel, p) => document.querySelector(sel)?.dataset.status.startsWith(p),
  { timeout: 10_000 }, pane(id), prefix);
const waitNotice = (page, id, text) => page.waitForFunction((sel, t) => document.querySelector(sel)?.textContent.includes(t),
  { timeout: 10_000 }, `${pane(id)} [data-role="notice"]`, text);

describe('a supervisor', () => {
  let web, page, id;
  before(async () => {
    web = await startWeb('supervisor');
    page = await openConsole(browser, web.url);
  });
  after(async () => {
    await page?.close();
    await web?.stop();
    if (id) await agent(['kill', id]);
  });

  test('the list shows a session started by the agent', async () => {
    id = await startSession(echoer(TAG));
    await page.waitForSelector(row(id), { timeout: 10_000 });
    const text = await page.$eval(row(id), (tr) => tr.innerText);
    assert.match(text, new RegExp(`sh -c .*${TAG}`));
    assert.match(text, /running|starting/);
  });

  test('its live output reaches the page', async () => {
    await openLive(page, id);
    await waitForText(page, id, `ready-${TAG}`);
    const r = await agent(['send', '--keys', id, 'live-line', 'Enter']);
    assert.equal(r.code, 0, r.stderr);
    await waitForText(page, id, 'got:live-line');
  });

  test('keystrokes are refused while read-only and the session never receives them', async () => {
    assert.match(await status(page, id), /^Read-only/);
    await typeInto(page, id, 'secret\r');
    await waitNotice(page, id, 'read-only');
    // The agent's line after it: had "secret" reached the session it would come first.
    const r = await agent(['send', '--keys', id, 'probe', 'Enter']);
    assert.equal(r.code, 0, r.stderr);
    await waitForText(page, id, 'got:probe');
    assert.doesNotMatch(await paneText(page, id), /secret/);
  });

  test('"take control" lets the page type, and the agent\'s send is refused naming the person', async () => {
    await page.click(`${pane(id)} [data-action="take"]`);
    await waitStatus(page, id, 'You have control');
    await typeInto(page, id, 'from-person\r');
    await waitForText(page, id, 'got:from-person');
    // The pane's size went to the session with the take.
    const dims = await page.evaluate((key) => { const p = window.ptyvisorConsole.panes.get(key); return `${p.term.rows} ${p.term.cols}`; }, `live:${id}`);
    await typeInto(page, id, 'size\r');
    await waitForText(page, id, `size:${dims}`);
    // The list says who holds it (from /ws/events).
    await page.waitForFunction((sel) => document.querySelector(sel)?.dataset.controller === 'supervisor', { timeout: 10_000 }, row(id));
    assert.match(await page.$eval(`${row(id)} [data-role="controller"]`, (e) => e.textContent), /nobody/);
    await screenshot(page, 'control');

    const r = await agent(['send', '--keys', id, 'from-agent', 'Enter']);
    assert.notEqual(r.code, 0, 'the agent\'s send must fail while a person holds the terminal');
    // The daemon names the person by uid (it does not look names up for the agent).
    const uid = execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' }).trim();
    assert.match(r.stderr, new RegExp(`nobody|uid ${uid}\\b`), 'the message names the person');
    assert.match(r.stderr, /held_by_supervisor|busy/);
    assert.doesNotMatch(await paneText(page, id), /got:from-agent/);
  });

  test('"hand back" restores the agent\'s input', async () => {
    await page.click(`${pane(id)} [data-action="release"]`);
    await waitStatus(page, id, 'Read-only');
    const r = await agent(['send', '--keys', id, 'from-agent-again', 'Enter']);
    assert.equal(r.code, 0, r.stderr);
    await waitForText(page, id, 'got:from-agent-again');
    assert.equal(await visible(page, `${pane(id)} [data-action="take"]`), true);
  });

  test('a request without the token gets 403', async () => {
    for (const path of ['/', '/api/info', '/api/sessions', '/assets/app.js']) {
      const r = await rawGet(web.origin, path);
      assert.equal(r.status, 403, path);
    }
    const ws = await rawGet(web.origin, '/ws/events', { Origin: web.origin }, { upgrade: true });
    assert.equal(ws.status, 403, '/ws/events');
    // And with it, the page is served (so the 403s above are the token's doing).
    const ok = await rawGet(web.origin, `/?token=${web.token}`);
    assert.equal(ok.status, 303);
    assert.match(String(ok.headers['set-cookie']), /ptyvisor_token=.*HttpOnly/);
  });

  test('a WebSocket from another Origin is refused', async () => {
    const cookie = { Cookie: `ptyvisor_token=${web.token}` };
    for (const origin of ['http://evil.example', `http://evil.example:${new URL(web.origin).port}`, 'null']) {
      const r = await rawGet(web.origin, `/ws/terminal?id=${id}`, { ...cookie, Origin: origin }, { upgrade: true });
      assert.equal(r.status, 403, origin);
    }
    const none = await rawGet(web.origin, '/ws/events', cookie, { upgrade: true });
    assert.equal(none.status, 403, 'no Origin');
    const same = await rawGet(web.origin, '/ws/events', { ...cookie, Origin: web.origin }, { upgrade: true });
    assert.equal(same.status, 101, 'the page\'s own Origin is accepted');
  });

  // Plays the recording of session `rec` and checks that it shows `lines`.
  async function play(rec, lines) {
    await page.click(`${row(rec)} [data-action="play"]`);
    for (const line of lines) {
      // The player's screen only: the pane's title holds the command line.
      await page.waitForFunction((sel, t) => document.querySelector(sel)?.innerText.includes(t),
        { timeout: 15_000 }, `${pane(rec, 'recording')} [data-role="terminal"]`, line);
    }
  }

  test('a recording plays', async () => {
    // It keeps running: the recording of a live session plays as far as it has got.
    // The lines are made by the shell ($0, $1) so that the command line does not hold them.
    const rec = await startSession(['sh', '-c', 'echo "recorded-$0"; echo "second $1 of the recording"; exec sleep 60', TAG, 'line']);
    await page.waitForFunction((sel) => {
      const tr = document.querySelector(sel);
      return tr && !tr.querySelector('[data-action="play"]').hidden;
    }, { timeout: 15_000 }, row(rec));
    await play(rec, [`recorded-${TAG}`, 'second line of the recording']);
    await screenshot(page, 'recording');
    assert.deepEqual(page.errors, []);
    await agent(['kill', rec]);
  });

  test('an exited session\'s recording still plays', async () => {
    const rec = await startSession(['sh', '-c', 'echo "ended-$0"', TAG]);
    await page.waitForFunction((sel) => document.querySelector(sel)?.dataset.state === 'exited', { timeout: 15_000 }, row(rec));
    assert.equal(await page.$eval(`${row(rec)} [data-action="play"]`, (b) => b.hidden), false,
      'the list offers "Play recording" once the session has exited (LIST\'s `recording`)');
    await play(rec, [`ended-${TAG}`]);
  });
});

describe('an observer', () => {
  let web, page, id;
  before(async () => {
    web = await startWeb('observer');
    page = await openConsole(browser, web.url);
  });
  after(async () => {
    await page?.close();
    await web?.stop();
    if (id) await agent(['kill', id]);
  });

  test('an observer (observer_group, not supervisor_group) sees no "take control"', async () => {
    id = await startSession(echoer(`${TAG}-obs`));
    await openLive(page, id);
    await waitForText(page, id, `ready-${TAG}-obs`);
    assert.equal(await page.$eval('body', (b) => b.dataset.mayControl), 'false');
    assert.equal(await visible(page, `${pane(id)} [data-action="take"]`), false);
    // Typing is refused as for a read-only supervisor, and nothing reaches the session.
    await typeInto(page, id, 'observer-typed\r');
    await waitNotice(page, id, 'read-only');
    const r = await agent(['send', '--keys', id, 'after-observer', 'Enter']);
    assert.equal(r.code, 0, r.stderr);
    await waitForText(page, id, 'got:after-observer');
    assert.doesNotMatch(await paneText(page, id), /observer-typed/);
    await screenshot(page, 'observer');
  });
});

describe('a flood', () => {
  let web, page, id;
  before(async () => {
    web = await startWeb('supervisor');
    page = await openConsole(browser, web.url);
  });
  after(async () => {
    await page?.close();
    await web?.stop();
    if (id) await agent(['kill', id]);
  });

  // The pane's visible rows and the colour of one cell, read from xterm.js's buffer.
  const paneScreen = (key) => page.evaluate((k) => {
    const p = window.ptyvisorConsole.panes.get(k);
    const b = p.term.buffer.active;
    const rows = [];
    let red = null;
    for (let i = 0; i < p.term.rows; i++) {
      const line = b.getLine(b.baseY + i);
      const text = line?.translateToString(true) ?? '';
      rows.push(text);
      const at = text.indexOf('red done');
      if (at >= 0) { const c = line.getCell(at); red = { palette: c.isFgPalette(), fg: c.getFgColor(), bold: !!c.isBold() }; }
    }
    return { rows, red, screens: p.screens };
  }, key);

  test('a flood reaches the page as screens, then bytes again, and the pane ends on the session\'s screen', async () => {
    // 20 MB of lines at once, then a coloured last line, then an echo of what it is sent.
    id = await startSession(['sh', '-c', 'read go; seq 1 3000000; printf "\\033[1;31mred done\\033[0m\\n"; exec cat']);
    await openLive(page, id);
    await waitStatus(page, id, 'Read-only');
    const key = `live:${id}`;
    const go = await agent(['send', '--keys', id, 'Enter']);
    assert.equal(go.code, 0, go.stderr);
    await waitForText(page, id, 'red done', 60_000);
    // The screen that shows the end of the flood may not be the last: the flood is over once a
    // screen shows the session quiet.
    await page.waitForFunction((k) => { const p = window.ptyvisorConsole.panes.get(k); return p.screens > 0 && !p.screensOnly; },
      { timeout: 10_000 }, key);
    const flood = await paneScreen(key);
    assert.ok(flood.screens >= 2, `the flood came as screens (a first one and the last): ${flood.screens}`);
    assert.deepEqual(flood.red, { palette: true, fg: 1, bold: true }, 'the last screen keeps its colours');
    // After the flood the session's output is bytes again: no further screen for this line.
    const r = await agent(['send', '--keys', id, 'after-the-flood', 'Enter']);
    assert.equal(r.code, 0, r.stderr);
    await waitForText(page, id, 'after-the-flood\nafter-the-flood');  // the PTY's echo, then cat's
    const now = await paneScreen(key);
    assert.equal(now.screens, flood.screens, 'bytes, not screens, once the flood is over');
    // What the pane shows is what the session's terminal shows.
    const screen = await agent(['screen', id]);
    assert.equal(screen.code, 0, screen.stderr);
    const trim = (rows) => { const r = rows.map((l) => l.trimEnd()); while (r.length && r[r.length - 1] === '') r.pop(); return r; };
    assert.deepEqual(trim(now.rows), trim(screen.stdout.split('\n')));
  });

  test('a session that ends during a flood: the pane shows its last screen, then that it exited', async () => {
    const ended = await startSession(['sh', '-c', 'read go; seq 1 3000000; echo "the end"; exit 3']);
    await openLive(page, ended);
    await waitStatus(page, ended, 'Read-only');
    const go = await agent(['send', '--keys', ended, 'Enter']);
    assert.equal(go.code, 0, go.stderr);
    await page.waitForFunction((sel) => document.querySelector(sel)?.dataset.status.startsWith('exited'), { timeout: 60_000 }, pane(ended));
    assert.match(await status(page, ended), /exit 3/);
    const p = await page.evaluate((k) => ({ screens: window.ptyvisorConsole.panes.get(k).screens }), `live:${ended}`);
    assert.ok(p.screens >= 1, 'the flood came as screens');
    const text = await paneText(page, ended);
    assert.match(text, /^2999999\n3000000\nthe end$/m, `the last lines before the exit; the pane ends with ${JSON.stringify(text.trimEnd().slice(-100))}; ptyvisor web said: ${web.stderr()}`);
  });
});
