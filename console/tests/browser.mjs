// Shared by the browser tests and the latency benchmark: Debian's chromium, headless, driven by
// puppeteer-core (no browser download). --no-sandbox because CI runs the suites as root, where
// Chromium refuses its sandbox.
import puppeteer from 'puppeteer-core';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

export async function launch(extraArgs = []) {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-dev-shm-usage', ...extraArgs],
  });
}

// A page that has loaded the console from `url` (the URL with ?token=, as printed) and whose
// script has started. Errors thrown in the page fail the test that reads `errors`.
export async function openConsole(browser, url, { width = 1400, height = 900 } = {}) {
  const page = await browser.newPage();
  await page.setViewport({ width, height });
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]');
  return page;
}

export const row = (id) => `tr[data-session-id="${id}"]`;
export const pane = (id, kind = 'live') => `section.pane[data-kind="${kind}"][data-session-id="${id}"]`;

export async function openLive(page, id) {
  await page.waitForSelector(row(id));
  await page.click(`${row(id)} [data-action="open"]`);
  await page.waitForSelector(`${pane(id)}[data-status]`);
  // Attached: the status leaves "connecting…" once the server's first message arrives.
  await page.waitForFunction((sel) => !document.querySelector(sel).dataset.status.startsWith('connecting'), {}, pane(id));
}

// Waits until the terminal of session `id` shows `text` (its screen or scrollback).
export async function waitForText(page, id, text, timeout = 10_000) {
  await page.waitForFunction((key, t) => window.ptyvisorConsole.panes.get(key)?.text().includes(t),
    { timeout, polling: 50 }, `live:${id}`, text);
}

export const paneText = (page, id) => page.evaluate((key) => window.ptyvisorConsole.panes.get(key)?.text() ?? null, `live:${id}`);
export const status = (page, id, kind = 'live') => page.$eval(`${pane(id, kind)} [data-role="status"]`, (e) => e.textContent);
export const visible = (page, sel) => page.$eval(sel, (e) => !e.hidden && e.getClientRects().length > 0).catch(() => false);

// Types into the focused terminal of session `id` (clicks it first to give it the focus).
export async function typeInto(page, id, text) {
  await page.click(`${pane(id)} .xterm`);
  await page.keyboard.type(text);
}

// Waits until `cond()` (in this process) is true: for state the test reads from a server it
// runs itself, which has no event to await. Fails after `timeout` ms.
export async function until(cond, what, timeout = 10_000) {
  const end = Date.now() + timeout;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
