// The page alone, against tests/mock-server.mjs (scripted sessions, no daemon): what the page
// shows and sends. The real server and daemon are exercised by e2e.test.mjs.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { launch, openConsole, openLive, pane, paneText, row, status, typeInto, until, visible, waitForText } from './browser.mjs';
import { startMock } from './mock-server.mjs';

const BASH = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const TRAIN = '0f1e2d3c4b5a69788796a5b4c3d2e1f0';
const EXITED = 'deadbeefdeadbeefdeadbeefdeadbeef';

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

describe('as a supervisor', () => {
  let mock, page;
  const requests = [];
  before(async () => {
    mock = await startMock({ role: 'supervisor', tickMs: 200 });
    page = await openConsole(browser, mock.url);
    page.on('request', (r) => requests.push(new URL(r.url()).pathname));
  });
  after(async () => { await page?.close(); await mock?.close(); });

  test('the list shows each session with its state, command, controller and last command', async () => {
    await page.waitForSelector(row(EXITED));
    const cells = await page.$$eval('tr[data-session-id]', (trs) => trs.map((tr) => ({
      id: tr.dataset.sessionId, state: tr.dataset.state, text: tr.innerText,
      waiting: !tr.querySelector('[data-role="waiting"]').hidden,
      play: !tr.querySelector('[data-action="play"]').hidden,
    })));
    const by = Object.fromEntries(cells.map((c) => [c.id, c]));
    assert.equal(cells.length, 3);
    assert.equal(by[TRAIN].state, 'running');
    assert.match(by[TRAIN].text, /python3 train\.py --epochs 3/);
    assert.equal(by[TRAIN].waiting, true, 'waiting for input badge');
    assert.match(by[TRAIN].text, /running/);
    assert.match(by[BASH].text, /make test[\s\S]*exit 0/);
    assert.equal(by[BASH].play, true, 'a recorded session offers "Play recording"');
    assert.equal(by[TRAIN].play, false);
    assert.equal(by[EXITED].state, 'exited');
    assert.match(by[EXITED].text, /exit 2/);
  });

  test('the list follows /ws/events and the page never polls', async () => {
    mock.update(TRAIN, { waiting_for_input: false, last_command: { seq: 2, command: 'python3 eval.py', exit_code: 1, running: false } });
    await page.waitForFunction((sel) => document.querySelector(sel).innerText.includes('python3 eval.py'), {}, row(TRAIN));
    assert.equal(await page.$eval(`${row(TRAIN)} [data-role="waiting"]`, (e) => e.hidden), true);
    assert.match(await page.$eval(`${row(TRAIN)} [data-role="last-exit"]`, (e) => e.textContent), /exit 1/);
    assert.deepEqual(requests.filter((p) => p.startsWith('/api/sessions')), []);
  });

  test('the page says when the daemon does not answer, and when it answers again', async () => {
    const link = '[data-role="connection"]';
    mock.unavailable('connect: No such file or directory');
    await page.waitForFunction((sel) => document.querySelector(sel).textContent.includes('does not answer'), {}, link);
    assert.notEqual(await page.$(row(TRAIN)), null, 'the last list stays');
    mock.update(TRAIN, {});
    await page.waitForFunction((sel) => document.querySelector(sel).textContent === 'live', {}, link);
  });

  test('opening a session shows its live output', async () => {
    await openLive(page, BASH);
    await waitForText(page, BASH, 'welcome to bash -l');
    mock.output(BASH, 'a line from the session\r\n');
    await waitForText(page, BASH, 'a line from the session');
    assert.match(await status(page, BASH), /Read-only/);
  });

  test('typing while read-only shows the refusal and nothing reaches the session', async () => {
    await typeInto(page, BASH, 'rm -rf /\r');
    await page.waitForFunction((sel) => document.querySelector(sel).textContent.includes('read-only'), {}, `${pane(BASH)} [data-role="notice"]`);
    assert.deepEqual(mock.inputs.get(BASH), []);
  });

  test('"Take control" lets the page type, says so, and sends the pane size', async () => {
    assert.equal(await visible(page, `${pane(BASH)} [data-action="take"]`), true);
    assert.equal(await visible(page, `${pane(BASH)} [data-action="release"]`), false);
    await page.click(`${pane(BASH)} [data-action="take"]`);
    await page.waitForFunction((sel) => document.querySelector(sel).dataset.status === 'You have control', {}, pane(BASH));
    assert.equal(await visible(page, `${pane(BASH)} [data-action="take"]`), false);
    assert.equal(await visible(page, `${pane(BASH)} [data-action="release"]`), true);
    await typeInto(page, BASH, 'echo typed by a person\r');
    await until(() => mock.inputs.get(BASH).join('') === 'echo typed by a person\r', 'the typed line to reach the session');
    const t = [...mock.terminals].find((x) => x.id === BASH);
    const dims = await page.evaluate((key) => { const p = window.ptyvisorConsole.panes.get(key); return { cols: p.term.cols, rows: p.term.rows }; }, `live:${BASH}`);
    assert.deepEqual(t.size, dims);
    await page.waitForFunction((sel) => document.querySelector(sel).dataset.controller === 'supervisor', {}, row(BASH));
  });

  test('a paste longer than a WebSocket message may be arrives whole, in pieces', async () => {
    const text = 'é😀x'.repeat(30_000);      // 120,000 UTF-16 units, 210,000 bytes of UTF-8
    const before = mock.inputs.get(BASH).length;
    await page.evaluate((key, t) => window.ptyvisorConsole.panes.get(key).term.paste(t), `live:${BASH}`, text);
    await until(() => mock.inputs.get(BASH).slice(before).join('').length >= text.length, 'the paste to arrive');
    const pieces = mock.inputs.get(BASH).slice(before);
    assert.equal(pieces.join(''), text);
    assert.ok(pieces.length > 1 && pieces.every((p) => Buffer.byteLength(JSON.stringify({ type: 'input', data: p })) < 64 * 1024));
  });

  test('"Hand back" returns control and typing is refused again', async () => {
    await page.click(`${pane(BASH)} [data-action="release"]`);
    await page.waitForFunction((sel) => document.querySelector(sel).dataset.status.startsWith('Read-only'), {}, pane(BASH));
    const before = mock.inputs.get(BASH).length;
    await typeInto(page, BASH, 'x');
    await page.waitForFunction((sel) => document.querySelector(sel).textContent.includes('read-only'), {}, `${pane(BASH)} [data-role="notice"]`);
    assert.equal(mock.inputs.get(BASH).length, before);
  });

  test('several panes open side by side and each closes on its own', async () => {
    await openLive(page, TRAIN);
    await waitForText(page, TRAIN, 'welcome to python3');
    const boxes = await page.$$eval('section.pane[data-kind="live"]', (ps) => ps.map((p) => p.getBoundingClientRect().top));
    assert.equal(boxes.length, 2);
    assert.equal(boxes[0], boxes[1], 'the panes share a row of the grid');
    await page.click(`${pane(TRAIN)} [data-action="close"]`);
    assert.equal(await page.$(pane(TRAIN)), null);
    assert.notEqual(await page.$(pane(BASH)), null);
    await until(() => ![...mock.terminals].some((t) => t.id === TRAIN), 'closing the pane to close its WebSocket');
  });

  test('a flood the page cannot draw in time is skipped, said, and output goes on', async () => {
    await openLive(page, TRAIN);
    // Low limits, so that this machine's speed does not decide whether the page falls behind.
    await page.evaluate(() => Object.assign(window.ptyvisorConsole.limits, { backlog: 64 << 10 }));
    const line = 'flood '.repeat(13) + '\r\n';
    const chunk = line.repeat(Math.ceil((1 << 20) / line.length));
    mock.output(TRAIN, chunk.repeat(8));                         // 8 MiB in one frame: xterm.js needs a while
    for (let i = 0; i < 8; i++) mock.output(TRAIN, chunk);   // which these frames arrive during
    await page.waitForFunction((sel) => document.querySelector(sel).textContent.includes('bytes of output skipped'),
      { timeout: 30_000, polling: 20 }, `${pane(TRAIN)} [data-role="notice"]`);
    mock.output(TRAIN, 'after the flood\r\n');
    await waitForText(page, TRAIN, 'after the flood', 30_000);
    await page.click(`${pane(TRAIN)} [data-action="close"]`);
    await page.evaluate(() => Object.assign(window.ptyvisorConsole.limits, { backlog: 256 << 10 }));
  });

  test('while one pane floods, another pane shows its output and the flood stays bounded', async () => {
    await openLive(page, BASH);
    await openLive(page, TRAIN);
    const line = 'flood '.repeat(13) + '\r\n';
    const chunk = line.repeat(Math.ceil((256 << 10) / line.length));
    let flooding = true;
    // 256 KiB every 5 ms for as long as the test runs: far more than xterm.js draws.
    const flood = (async () => { while (flooding) { mock.output(TRAIN, chunk); await new Promise((r) => setTimeout(r, 5)); } })();
    try {
      await page.waitForFunction((sel) => document.querySelector(sel).textContent.includes('bytes of output skipped'),
        { timeout: 30_000, polling: 20 }, `${pane(TRAIN)} [data-role="notice"]`);
      mock.output(BASH, 'quiet line during the flood\r\n');
      await waitForText(page, BASH, 'quiet line during the flood', 10_000);
      const queued = await page.evaluate((key) => window.ptyvisorConsole.panes.get(key).queued, `live:${TRAIN}`);
      const backlog = await page.evaluate(() => window.ptyvisorConsole.limits.backlog);
      assert.ok(queued <= backlog + chunk.length, `the flooding pane holds ${queued} bytes, at most ${backlog} + one message expected`);
    } finally {
      flooding = false;
      await flood;
    }
    mock.output(TRAIN, 'after the second flood\r\n');
    await waitForText(page, TRAIN, 'after the second flood', 30_000);
    await page.click(`${pane(TRAIN)} [data-action="close"]`);
    await page.click(`${pane(BASH)} [data-action="close"]`);
  });

  test('a flood the server shows as screens: each screen replaces the pane, and bytes resume after the last', async () => {
    await openLive(page, TRAIN);
    mock.output(TRAIN, 'before the screens\r\n');
    await waitForText(page, TRAIN, 'before the screens');
    const notice = `${pane(TRAIN)} [data-role="notice"]`;
    mock.screen(TRAIN, { offset: 1000, size: { cols: 80, rows: 4 }, data: 'screen one\r\nline two\x1b[2;9H', streaming: false, skipped: 900 });
    await page.waitForFunction((sel) => document.querySelector(sel).textContent.includes('printing faster'), {}, notice);
    await waitForText(page, TRAIN, 'screen one');
    let text = await paneText(page, TRAIN);
    assert.doesNotMatch(text, /before the screens/, 'the screen replaces what the pane showed');
    mock.screen(TRAIN, { offset: 2000, size: { cols: 80, rows: 4 }, data: 'final screen\x1b[1;13H', streaming: true, skipped: 1900 });
    mock.output(TRAIN, 'after the screens\r\n');
    await waitForText(page, TRAIN, 'after the screens');
    text = await paneText(page, TRAIN);
    assert.doesNotMatch(text, /screen one/);
    assert.match(text, /^final screen\S/m, 'bytes continue at the screen\'s cursor');
    await page.waitForFunction((sel) => document.querySelector(sel).textContent.includes('live again'), {}, notice);
    const p = await page.evaluate((key) => { const x = window.ptyvisorConsole.panes.get(key); return { screens: x.screens, skipped: x.skipped, cols: x.term.cols, rows: x.term.rows }; }, `live:${TRAIN}`);
    assert.equal(p.screens, 2);
    assert.equal(p.cols, 80);
    assert.equal(p.rows, 4, 'a read-only pane takes the screen\'s size');
    await page.click(`${pane(TRAIN)} [data-action="close"]`);
  });

  test('an exited session says how it ended', async () => {
    await openLive(page, EXITED);
    await page.waitForFunction((sel) => document.querySelector(sel).dataset.status.startsWith('exited'), {}, pane(EXITED));
    assert.equal(await status(page, EXITED), 'exited (exit 2)');
    assert.equal(await visible(page, `${pane(EXITED)} [data-action="take"]`), false);
  });

  test('"Play recording" plays the session\'s recording', async () => {
    await page.click(`${row(BASH)} [data-action="play"]`);
    await page.waitForFunction((sel) => document.querySelector(sel)?.innerText.includes('this was recorded by ptyvisor'),
      { timeout: 10_000 }, `${pane(BASH, 'recording')} [data-role="terminal"]`);
    assert.deepEqual(page.errors, []);
  });
});

describe('as an observer', () => {
  let mock, page;
  before(async () => {
    mock = await startMock({ role: 'observer', user: 'olga' });
    page = await openConsole(browser, mock.url);
  });
  after(async () => { await page?.close(); await mock?.close(); });

  test('an observer is offered no "Take control"', async () => {
    await openLive(page, BASH);
    await waitForText(page, BASH, 'welcome to bash -l');
    assert.equal(await page.$eval('body', (b) => b.dataset.mayControl), 'false');
    assert.equal(await visible(page, `${pane(BASH)} [data-action="take"]`), false);
    assert.match(await paneText(page, BASH), /welcome/);
  });
});
