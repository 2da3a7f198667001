// node tests/screenshots.mjs [DIR]: the screenshots of docs/images/console-*.png, taken in
// chromium from the page served by tests/mock-server.mjs with scripted content (so they are
// reproducible and show no real account). DIR defaults to ../docs/images.
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { launch, openConsole, openLive, pane, row, typeInto, waitForText } from './browser.mjs';
import { startMock } from './mock-server.mjs';

const dir = process.argv[2] ?? fileURLToPath(new URL('../../docs/images/', import.meta.url));
const BASH = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const TRAIN = '0f1e2d3c4b5a69788796a5b4c3d2e1f0';

const browser = await launch();
try {
  // A supervisor: two terminals side by side, one taken over, and a recording playing.
  let mock = await startMock({ role: 'supervisor', user: 'alice', tickMs: 1e9 });
  let page = await openConsole(browser, mock.url, { width: 1500, height: 1000 });
  await openLive(page, BASH);
  await openLive(page, TRAIN);
  mock.output(BASH, 'ls\r\nMakefile  README.md  src  tests\r\n$ make test\r\n[ 50%] Building CXX object src/main.cpp.o\r\n[100%] Linking CXX executable app\r\nall 42 tests passed\r\n$ ');
  mock.output(TRAIN, '\r\nepoch 1/3: loss 0.913\r\nepoch 2/3: loss 0.522\r\nepoch 3/3: loss 0.301\r\nsave the model to model.pt? [y/N] ');
  await waitForText(page, TRAIN, 'save the model');
  await page.click(`${pane(TRAIN)} [data-action="take"]`);
  await page.waitForFunction((sel) => document.querySelector(sel).dataset.status === 'You have control', {}, pane(TRAIN));
  await typeInto(page, TRAIN, 'y');
  await waitForText(page, TRAIN, '[y/N] y');
  await page.click(`${row(BASH)} [data-action="play"]`);
  await page.waitForFunction((sel) => document.querySelector(sel)?.innerText.includes('recorded by ptyvisor'), { timeout: 10_000 }, pane(BASH, 'recording'));
  await page.screenshot({ path: join(dir, 'console-supervisor.png') });
  await page.close();
  await mock.close();

  // An observer: the same terminal, read-only, no "Take control"; a refused keystroke.
  mock = await startMock({ role: 'observer', user: 'olga', tickMs: 1e9 });
  page = await openConsole(browser, mock.url, { width: 1100, height: 700 });
  await openLive(page, TRAIN);
  mock.output(TRAIN, '\r\nepoch 1/3: loss 0.913\r\nepoch 2/3: loss 0.522\r\n');
  await waitForText(page, TRAIN, 'epoch 2/3');
  await typeInto(page, TRAIN, 'q');
  await page.waitForFunction((sel) => document.querySelector(sel).textContent.includes('read-only'), {}, `${pane(TRAIN)} [data-role="notice"]`);
  await page.screenshot({ path: join(dir, 'console-observer.png') });
  await page.close();
  await mock.close();
  console.log(`screenshots: ${join(dir, 'console-supervisor.png')}, ${join(dir, 'console-observer.png')}`);
} finally {
  await browser.close();
}
