// bench/console/latency.mjs [--seconds N] [--interval-ms N]: how long a byte takes from a
// session's PTY to being drawn in the console page, with 16 terminals open at once.
//
// 15 sessions print a marker "M<unix seconds with microseconds>" every --interval-ms (python3:
// the time is read just before the write to the PTY); the 16th floods (`yes`) in the second
// phase. In the page every terminal's write() is wrapped: the markers in each chunk are parsed
// out, and once xterm.js has parsed the chunk (write callback) the next onRender of that
// terminal (the frame that draws it) stamps them with the browser's clock. The session and
// the browser share the machine's CLOCK_REALTIME (performance.timeOrigin + now()).
// Latency = drawn - printed. Phase 1: quiet (no flood); phase 2: with the flood.
//
// --no-stream: the page reads with WebSocket instead of WebSocketStream.
// --trace: also records Chromium's trace for 3 s of the flood phase and prints where the page's
// main thread spent that time (self time per trace event, CrRendererMain).
//
// Needs a daemon and the console's environment: run it through bench/console/latency.sh.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { launch, openConsole, openLive } from '../../console/tests/browser.mjs';
import { WebSocket, agent, requireEnv, startSession, startWeb } from '../../console/tests/harness.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? Number(args[i + 1]) : dflt; };
const seconds = opt('--seconds', 15);
const intervalMs = opt('--interval-ms', 100);
const trace = args.includes('--trace');
// --no-stream: the page reads its terminals with WebSocket, not WebSocketStream (limits.stream).
const noStream = args.includes('--no-stream');
const TERMINALS = 16;

requireEnv();
const root = fileURLToPath(new URL('../../', import.meta.url));
const commit = (() => {
  try { return execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(); } catch { return 'unknown'; }
})();

const marker = ['python3', '-u', '-c',
  `import sys, time\nwhile True:\n    sys.stdout.write("M%.6f\\n" % time.time())\n    sys.stdout.flush()\n    time.sleep(${intervalMs / 1000})\n`];
const flooder = ['sh', '-c', 'read go; exec yes "flood flood flood flood flood flood flood flood flood flood"'];

const ids = [];
const web = await startWeb('supervisor');
const browser = await launch();
try {
  for (let i = 0; i < TERMINALS - 1; i++) ids.push(await startSession(marker));
  const floodId = await startSession(flooder);
  ids.push(floodId);

  // Large enough that every pane is on screen: xterm.js does not render hidden terminals.
  const page = await openConsole(browser, web.url, { width: 2800, height: 2700 });
  if (noStream) await page.evaluate(() => { window.ptyvisorConsole.limits.stream = false; });
  for (const id of ids) await openLive(page, id);
  const offscreen = await page.$$eval('section.pane[data-kind="live"]', (ps) => ps.filter((p) => {
    const r = p.getBoundingClientRect();
    return r.bottom > window.innerHeight || r.right > window.innerWidth;
  }).length);
  if (offscreen) console.warn(`latency: ${offscreen} panes are partly off screen`);

  await page.evaluate((flood) => {
    const lat = { phase: null, samples: { quiet: [], flood: [] }, arrived: { quiet: [], flood: [] }, floodBytes: 0 };
    const now = () => performance.timeOrigin + performance.now();
    window.__latency = lat;
    for (const p of window.ptyvisorConsole.panes.values()) {
      const term = p.term;
      const write = term.write.bind(term);
      if (p.id === flood) {
        term.write = (data, cb) => { if (lat.phase === 'flood') lat.floodBytes += data.length; write(data, cb); };
        continue;
      }
      const decoder = new TextDecoder('latin1');
      let partial = '';
      let parsed = [];          // printed times of markers parsed but not yet drawn
      term.onRender(() => {
        if (!parsed.length) return;
        const drawn = now();
        for (const { t, phase } of parsed) if (phase) lat.samples[phase].push(drawn - t * 1000);
        parsed = [];
      });
      term.write = (data, cb) => {
        const arrived = now();    // the WebSocket message handler runs: transport done
        const text = partial + decoder.decode(data);
        const cut = text.lastIndexOf('\n');
        const whole = cut < 0 ? '' : text.slice(0, cut);
        partial = cut < 0 ? text.slice(-64) : text.slice(cut + 1);
        const found = [];
        for (const m of whole.matchAll(/M(\d{9,11}\.\d{6})/g)) {
          // Only markers printed during a phase (not the output replayed on attach).
          if (!lat.phase || Number(m[1]) * 1000 < lat.since) continue;
          found.push({ t: Number(m[1]), phase: lat.phase });
          if (lat.phase) lat.arrived[lat.phase].push(arrived - Number(m[1]) * 1000);
        }
        write(data, () => { parsed.push(...found); cb?.(); });
      };
    }
  }, floodId);

  // Where the page's main thread went in each phase (Chromium's counters, seconds busy).
  const busy = {};
  let traceSummary = null;
  const phase = async (name) => {
    const m0 = await page.metrics();
    await page.evaluate((n) => { window.__latency.phase = n; window.__latency.since = performance.timeOrigin + performance.now(); }, name);
    if (trace && name === 'flood') {
      await new Promise((r) => setTimeout(r, 1000));
      await page.tracing.start({ categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8.execute', 'blink', 'cc'] });
      await new Promise((r) => setTimeout(r, 3000));
      traceSummary = summarize(JSON.parse(Buffer.from(await page.tracing.stop()).toString("utf8")), 3000);
      await new Promise((r) => setTimeout(r, seconds * 1000 - 4000));
    } else {
      await new Promise((r) => setTimeout(r, seconds * 1000));
    }
    await page.evaluate(() => { window.__latency.phase = null; });
    const m1 = await page.metrics();
    const d = (k) => ((m1[k] - m0[k]) / seconds * 100).toFixed(0);
    busy[name] = `main thread busy ${d('TaskDuration')}%: script ${d('ScriptDuration')}%, layout ${d('LayoutDuration')}%, style ${d('RecalcStyleDuration')}%`;
  };
  await phase('quiet');
  const go = await agent(['send', '--keys', floodId, 'Enter']);
  if (go.code !== 0) throw new Error(`could not start the flood: ${go.stderr}`);
  await page.waitForFunction((key) => window.ptyvisorConsole.panes.get(key).text().includes('flood flood'), { timeout: 10_000 }, `live:${floodId}`);
  await phase('flood');
  const result = await page.evaluate((key) => ({
    samples: window.__latency.samples, arrived: window.__latency.arrived, floodBytes: window.__latency.floodBytes,
    // `?? 0`: a page from before the server's screens has neither.
    skipped: window.ptyvisorConsole.panes.get(key).skipped + (window.ptyvisorConsole.panes.get(key).screenSkipped ?? 0),
    screens: window.ptyvisorConsole.panes.get(key).screens ?? 0,
  }), `live:${floodId}`);
  const version = await browser.version();
  await page.close();

  // The same with no browser: Node clients on the same WebSockets, the flood read as fast as
  // it comes. What is left is the daemon and `ptyvisor web`; the rest above is the page's.
  const direct = await nodeClients(ids, floodId);

  const stats = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const q = (p) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
    return s.length ? `n=${s.length} p50=${q(0.5).toFixed(1)} ms p99=${q(0.99).toFixed(1)} ms max=${s[s.length - 1].toFixed(1)} ms` : 'n=0 (no samples)';
  };
  console.log(`console latency, PTY write -> drawn in the page (xterm.js onRender after the write callback)`);
  console.log(`commit ${commit}, ${version}, ${TERMINALS} terminals, ${TERMINALS - 1} printing a marker every ${intervalMs} ms, ${seconds} s per phase`);
  console.log(`  quiet (no flood):       drawn   ${stats(result.samples.quiet)}`);
  console.log(`                          arrived ${stats(result.arrived.quiet)}`);
  console.log(`                          ${busy.quiet}`);
  console.log(`  one terminal flooding:  drawn   ${stats(result.samples.flood)}`);
  console.log(`                          arrived ${stats(result.arrived.flood)}`);
  console.log(`                          ${busy.flood}`);
  console.log(`  ("arrived": printed -> the page's WebSocket handler; "drawn": -> xterm.js rendered it)`);
  console.log(`  no browser, Node WebSocket clients, one flooding: ${stats(direct.samples)}`);
  console.log(`                          (the flood arrived at ${(direct.floodBytes / seconds / 1e6).toFixed(2)} MB/s)`);
  if (traceSummary) console.log(`  the page's main thread in 3 s of the flood (self time, % of the 3 s): ${traceSummary}`);
  console.log(`  the flooding terminal was handed ${(result.floodBytes / seconds / 1e6).toFixed(2)} MB/s of \`yes\` to draw (${result.screens} screens), and skipped ${result.skipped} bytes`);
} finally {
  await browser.close();
  for (const id of ids) await agent(['kill', id]);
  await web.stop();
}

// Phase 3: one WebSocket per session from Node, as the page opens them (token, same Origin).
async function nodeClients(sessionIds, flood) {
  const samples = [];
  let floodBytes = 0;
  let since = Infinity;
  // One at a time, as a person opens panes: the daemon admits only a few connections of one
  // process at once before their first request (max_unauthenticated_per_peer).
  const sockets = [];
  for (const id of sessionIds) sockets.push(await new Promise((resolve, reject) => {
    const u = new URL(web.url);
    const ws = new WebSocket(`ws://${u.host}/ws/terminal?id=${id}&token=${web.token}`, { origin: web.origin });
    let partial = '';
    ws.on('message', (data, isBinary) => {
      if (!isBinary) {
        const m = JSON.parse(data.toString());
        if (m.type === 'attached') resolve(ws);
        else if (m.type === 'error') reject(new Error(`terminal ${id}: ${m.code}: ${m.message}`));
        return;
      }
      if (id === flood) { if (Date.now() >= since) floodBytes += data.length; return; }
      const arrived = performance.timeOrigin + performance.now();
      const text = partial + data.toString('latin1');
      const cut = text.lastIndexOf('\n');
      partial = cut < 0 ? text.slice(-64) : text.slice(cut + 1);
      for (const m of (cut < 0 ? '' : text.slice(0, cut)).matchAll(/M(\d{9,11}\.\d{6})/g)) {
        if (Number(m[1]) * 1000 >= since) samples.push(arrived - Number(m[1]) * 1000);
      }
    });
    ws.once('error', reject);
    ws.once('close', (code) => reject(new Error(`terminal ${id}: closed (${code}) before attached`)));
  }));
  since = Date.now() + 1000;   // past the replay of recent output
  await new Promise((r) => setTimeout(r, 1000 + seconds * 1000));
  for (const ws of sockets) ws.close();
  return { samples, floodBytes };
}

// Self time per event name on the renderer's main thread(s), as % of `ms`: the top 10.
function summarize(tr, ms) {
  const events = tr.traceEvents ?? tr;
  const main = new Set(events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`));
  const xs = events.filter((e) => e.ph === 'X' && main.has(`${e.pid}:${e.tid}`) && e.dur > 0).sort((a, b) => a.ts - b.ts || b.dur - a.dur);
  const self = new Map();
  const stack = [];
  for (const e of xs) {
    while (stack.length && stack[stack.length - 1].end <= e.ts) stack.pop();
    const parent = stack[stack.length - 1];
    if (parent) parent.self -= e.dur;
    const node = { name: e.name, end: e.ts + e.dur, self: e.dur };
    stack.push(node);
    node.done = () => self.set(node.name, (self.get(node.name) ?? 0) + node.self);
    (e.__nodes ??= []).push(node);
  }
  // Every node's self is final once all events are seen.
  for (const e of xs) for (const n of e.__nodes) n.done();
  return [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10)
    .map(([n, us]) => `${n} ${(us / 1000 / ms * 100).toFixed(1)}%`).join(', ');
}
