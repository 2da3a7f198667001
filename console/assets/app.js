// The console page of `ptyvisor web` (docs/console-api.md): a live list of sessions from
// /ws/events, and panes that show a session's terminal (/ws/terminal) or play its recording.
// Plain ES module, no build step; every URL is relative so that the page also works behind a
// reverse proxy that serves it under a path prefix. The page never polls: the list changes
// only when the server sends it, and the ages tick on a local timer.
import { Terminal } from './vendor/xterm.js';
import { FitAddon } from './vendor/addon-fit.js';
import { age, clock, commandLine, exitText } from './format.js';

const $ = (sel, root = document) => root.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  e.append(...children);
  return e;
}

function wsUrl(path) {
  const u = new URL(path, location.href);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.href;
}

function controllerText(controller, user, since) {
  if (controller === 'supervisor') return `${user ?? 'a supervisor'}${since ? ` since ${clock(since)}` : ''}`;
  return 'agent';
}

// How much output a pane hands xterm.js, so that one flooding pane costs the page a bounded
// share of each frame and the other panes' output is still drawn in that frame
// (bench/console/latency.mjs; the figures are in bench/console/README.md):
// - frame: bytes a pane may write to xterm.js per animation frame; past it, its output waits
//   in the pane's queue for the next frame (quiet panes are served first).
// - backlog: a pane whose queue exceeds this falls behind on purpose: it skips to its newest
//   `tail` bytes (from a line start) and says how much it skipped, as a terminal multiplexer
//   does for a pane nobody can read at that speed. The session's log and recording keep all.
// - floodMs: while skipping, the pane is redrawn at most once per floodMs.
// The tests lower them (window.ptyvisorConsole.limits) to exercise the skipping.
// - read, stream: see LivePane.connectStream.
const limits = { frame: 32 << 10, backlog: 256 << 10, tail: 8 << 10, floodMs: 100, read: 64 << 10, stream: true };

const state = {
  info: null,                 // /api/info
  sessions: new Map(),        // id -> SESSION, as last sent by /ws/events
  rows: new Map(),            // id -> { tr, cells }
  panes: new Map(),           // key ("live:ID" or "play:ID") -> Pane
};
// For the browser tests and the latency benchmark: the open panes and their terminals.
window.ptyvisorConsole = { panes: state.panes, sessions: state.sessions, limits };

// ---- the output scheduler ------------------------------------------------------------------
// One requestAnimationFrame loop for every pane, running only while some pane has output
// queued: it gives each pane its byte budget for the new frame, serves the panes that are not
// flooding first (in order of the least queued), then lets a flooding pane draw its newest
// output if its floodMs have passed.
let frameRequested = false;
let frameCount = 0;             // animation frames seen, for the panes' read budgets
let frameWaiters = [];
const nextFrame = () => new Promise((resolve) => { frameWaiters.push(resolve); wantFrame(); });
function wantFrame() {
  if (frameRequested) return;
  frameRequested = true;
  requestAnimationFrame(onFrame);
}
function onFrame(now) {
  frameRequested = false;
  frameCount++;
  const waiters = frameWaiters;
  frameWaiters = [];
  for (const w of waiters) w();
  const live = [...state.panes.values()].filter((p) => p instanceof LivePane);
  for (const p of live) p.budget = limits.frame;
  const waiting = live.filter((p) => p.queued > 0 || p.flooding);
  waiting.sort((a, b) => (a.flooding - b.flooding) || (a.queued - b.queued));
  for (const p of waiting) p.drain(now);
  if (live.some((p) => p.queued > 0 || p.flooding)) wantFrame();
}


// ---- the session list ----------------------------------------------------------------------

function row(id) {
  let r = state.rows.get(id);
  if (r) return r;
  const cells = {
    state: el('span'), waiting: el('span', { class: 'badge waiting', 'data-role': 'waiting', text: 'waiting for input', hidden: true }),
    exit: el('span', { class: 'sub', 'data-role': 'exit' }),
    command: el('span', { 'data-role': 'command' }), cwd: el('span', { class: 'sub' }),
    age: el('span', { 'data-role': 'age' }),
    controller: el('span', { 'data-role': 'controller' }),
    held: el('span', { class: 'badge held', text: 'held', hidden: true }),
    last: el('span', { 'data-role': 'last-command' }), lastExit: el('span', { class: 'sub', 'data-role': 'last-exit' }),
    open: el('button', { type: 'button', 'data-action': 'open', text: 'Open' }),
    play: el('button', { type: 'button', 'data-action': 'play', text: 'Play recording', hidden: true }),
    download: el('a', { 'data-role': 'recording', href: `api/sessions/${encodeURIComponent(id)}/recording`, download: `${id}.cast`, text: '.cast', hidden: true }),
  };
  cells.open.addEventListener('click', (e) => { e.stopPropagation(); openLive(id); });
  cells.play.addEventListener('click', (e) => { e.stopPropagation(); openRecording(id); });
  cells.download.addEventListener('click', (e) => e.stopPropagation());
  const tr = el('tr', { 'data-session-id': id },
    el('td', { class: 'state' }, cells.state, cells.waiting, cells.exit),
    el('td', { class: 'command' }, cells.command, cells.cwd),
    el('td', {}, cells.age),
    el('td', {}, cells.controller, cells.held),
    el('td', {}, cells.last, cells.lastExit),
    el('td', { class: 'actions' }, cells.open, ' ', cells.play, ' ', cells.download));
  tr.addEventListener('click', () => openLive(id));
  r = { tr, cells };
  state.rows.set(id, r);
  return r;
}

function renderSession(s) {
  const { tr, cells } = row(s.id);
  tr.dataset.state = s.state;
  tr.classList.toggle('state-exited', s.state === 'exited');
  cells.state.textContent = s.state;
  cells.exit.textContent = exitText(s.exit);
  cells.waiting.hidden = !s.waiting_for_input || s.state === 'exited';
  cells.command.textContent = commandLine(s.argv ?? []);
  cells.cwd.textContent = s.cwd ?? '';
  cells.age.textContent = age(Date.now() / 1000 - s.created);
  cells.age.title = new Date(s.created * 1000).toLocaleString();
  cells.controller.textContent = s.controller ? controllerText(s.controller, s.controller_user, s.controller_since) : '—';
  cells.held.hidden = s.controller !== 'supervisor';
  tr.dataset.controller = s.controller ?? '';
  const last = s.last_command;
  cells.last.textContent = last ? (last.command || '(no command text)') : '—';
  cells.lastExit.textContent = !last ? '' : last.running ? 'running' : last.exit_code === null ? '' : `exit ${last.exit_code}`;
  cells.lastExit.classList.toggle('exit-bad', !!last && !last.running && last.exit_code !== null && last.exit_code !== 0);
  cells.play.hidden = !s.recording;
  cells.download.hidden = !s.recording;
}

function renderList(sessions) {
  const tbody = $('[data-role="sessions"] tbody');
  const seen = new Set();
  state.sessions.clear();
  // Newest first: the session an agent just started is the one a person looks for.
  const sorted = [...sessions].sort((a, b) => b.created - a.created || a.id.localeCompare(b.id));
  let prev = null;
  for (const s of sorted) {
    state.sessions.set(s.id, s);
    seen.add(s.id);
    renderSession(s);
    const { tr } = state.rows.get(s.id);
    // Move rows only when out of place, so that a focused button keeps its focus.
    const want = prev ? prev.nextSibling : tbody.firstChild;
    if (want !== tr) tbody.insertBefore(tr, want);
    prev = tr;
  }
  for (const [id, r] of state.rows) {
    if (!seen.has(id)) { r.tr.remove(); state.rows.delete(id); }
  }
  for (const [, p] of state.panes) p.tr = state.rows.get(p.id)?.tr;
  for (const r of state.rows.values()) r.tr.classList.toggle('open', state.panes.has(`live:${r.tr.dataset.sessionId}`));
  $('[data-role="empty"]').hidden = sessions.length > 0;
}

setInterval(() => {
  for (const s of state.sessions.values()) {
    const r = state.rows.get(s.id);
    if (r) r.cells.age.textContent = age(Date.now() / 1000 - s.created);
  }
}, 10_000);

function connectEvents(attempt = 0) {
  const link = $('[data-role="connection"]');
  const ws = new WebSocket(wsUrl('ws/events'));
  ws.addEventListener('open', () => { attempt = 0; link.textContent = 'live'; link.classList.remove('down'); });
  ws.addEventListener('message', (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    if (m.type === 'sessions' && Array.isArray(m.sessions)) {
      link.textContent = 'live';
      link.classList.remove('down');
      renderList(m.sessions);
    } else if (m.type === 'unavailable') {
      // The server is up but the daemon does not answer; the list stays as it was last seen.
      link.textContent = `the daemon does not answer: ${m.message ?? ''}`;
      link.classList.add('down');
    }
  });
  ws.addEventListener('close', () => {
    // Reconnect with a growing delay: the server may be restarting. This is not polling; one
    // attempt at a time, and none while connected.
    const delay = Math.min(10_000, 500 * 2 ** attempt);
    link.textContent = `disconnected; retrying in ${Math.round(delay / 1000)} s`;
    link.classList.add('down');
    setTimeout(() => connectEvents(attempt + 1), delay);
  });
}

// ---- panes ---------------------------------------------------------------------------------

function paneFrame(kind, id, title) {
  const root = el('section', { class: `pane ${kind}`, 'data-session-id': id, 'data-kind': kind, 'aria-label': `${kind === 'live' ? 'Terminal' : 'Recording'} of ${title}` });
  const status = el('span', { class: 'status', 'data-role': 'status', 'aria-live': 'polite' });
  const close = el('button', { type: 'button', 'data-action': 'close', 'aria-label': 'Close this pane', text: 'Close' });
  const head = el('div', { class: 'pane-head' }, el('span', { class: 'pane-title', title, text: title }), status);
  const notice = el('div', { class: 'notice', 'data-role': 'notice', role: 'status', 'aria-live': 'polite' });
  const body = el('div', { class: 'term', 'data-role': 'terminal' });
  root.append(head, notice, body);
  return { root, head, status, close, notice, body };
}

function titleOf(id) {
  const s = state.sessions.get(id);
  return s ? `${commandLine(s.argv ?? [])}  (${id.slice(0, 8)})` : id;
}

class LivePane {
  constructor(id) {
    this.id = id;
    this.key = `live:${id}`;
    this.you = false;
    this.mayControl = false;
    this.ended = false;
    this.noticeTimer = 0;
    this.lastSize = '';
    this.queue = [];            // Uint8Arrays received and not yet handed to xterm.js
    this.queued = 0;            // their bytes
    this.budget = limits.frame; // bytes this pane may still hand xterm.js in this frame
    this.flooding = false;      // skipping to its newest output (see limits)
    this.lastDraw = 0;          // when a flooding pane last handed its tail to xterm.js
    this.lastOutput = 0;        // when output last arrived (performance.now())
    this.skipped = 0;           // bytes skipped in all (the benchmark reads it)
    this.skippedNow = 0;        // bytes skipped in the current flood
    this.screens = 0;           // screens drawn for the server's floods (the benchmark reads it)
    this.screenSkipped = 0;     // bytes the server did not send during its current flood
    this.screensOnly = false;   // the server sends screens, not bytes (a flood is on)
    const f = paneFrame('live', id, titleOf(id));
    Object.assign(this, f);
    this.take = el('button', { type: 'button', 'data-action': 'take', text: 'Take control', hidden: true });
    this.release = el('button', { type: 'button', 'data-action': 'release', text: 'Hand back', hidden: true });
    this.take.addEventListener('click', () => this.send({ type: 'take' }));
    this.release.addEventListener('click', () => this.send({ type: 'release' }));
    this.close.addEventListener('click', () => this.dispose());
    f.head.append(this.take, this.release, this.close);

    this.term = new Terminal({
      convertEol: false, scrollback: 5000, cursorBlink: false,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace', fontSize: 13,
    });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    // While read-only, Tab and Shift+Tab move the focus (keyboard users can leave the terminal);
    // while in control they belong to the session.
    this.term.attachCustomKeyEventHandler((e) => this.you || e.key !== 'Tab');
    this.term.onData((data) => this.sendInput(data));
    this.term.open(this.body);
    this.resizeObserver = new ResizeObserver(() => this.fitIfControlling());
    this.resizeObserver.observe(this.body);
    this.setStatus('connecting…');
    this.connect();
  }

  connect() {
    const url = wsUrl(`ws/terminal?id=${encodeURIComponent(this.id)}`);
    if (limits.stream && typeof WebSocketStream === 'function') { this.connectStream(url); return; }
    this.ws = new WebSocket(url);
    this.ws.binaryType = 'arraybuffer';
    this.ws.addEventListener('message', (ev) => {
      if (typeof ev.data !== 'string') { this.output(new Uint8Array(ev.data)); return; }
      this.text_(ev.data);
    });
    this.ws.addEventListener('close', (ev) => this.closed(ev.code));
  }

  // Where the browser has WebSocketStream (Chromium), the page reads a terminal at its own
  // pace: a pane reads at most limits.read bytes per animation frame, and past that the
  // flood waits in the socket. TCP then slows `ptyvisor web`, which stops reading the daemon,
  // which drops what this observer missed and says so (`dropped`). Without it, every message
  // of a flood is a task on the page's main thread, queued ahead of the other panes' output:
  // measured, the quiet panes' markers reached the page 0.3 s (p50) late behind a `yes`.
  async connectStream(url) {
    let code = 1006;
    try {
      this.wss = new WebSocketStream(url);
      const { readable, writable } = await this.wss.opened;
      this.writer = writable.getWriter();
      const reader = readable.getReader();
      let read = 0;
      let frame = -1;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        if (typeof value === 'string') { this.text_(value); continue; }
        // Chromium yields binary messages as ArrayBuffers; the spec now says Uint8Array.
        const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
        this.output(bytes);
        if (frame !== frameCount) { frame = frameCount; read = 0; }
        read += bytes.length;
        // A flooding pane draws only its newest output every floodMs: it reads about that
        // much per floodMs too, and leaves the rest to the daemon to drop.
        if (this.flooding && read > limits.tail) await new Promise((r) => setTimeout(r, limits.floodMs));
        else if (read > limits.read) await nextFrame();
      }
      code = (await this.wss.closed).closeCode ?? 1005;
    } catch (e) {
      code = e?.closeCode ?? 1006;
    }
    this.closed(code);
  }

  text_(data) {
    let m;
    try { m = JSON.parse(data); } catch { return; }
    this.onMessage(m);
  }

  closed(code) {
    this.you = false;
    this.showControl();
    if (!this.ended) this.setStatus(code === 1008 ? 'refused' : 'disconnected');
    this.take.hidden = true;
  }

  // A browser cannot slow a WebSocket down, and xterm.js parses and paints far slower than a
  // flood arrives: written as it comes, one `yes` would take the page's whole main thread and
  // the other panes' output would wait behind it for seconds. So output goes to xterm.js at
  // once only within the pane's budget for this frame; the rest waits for the next frames,
  // and past `backlog` the pane skips to its newest output (drain).
  output(bytes) {
    this.lastOutput = performance.now();
    if (!this.flooding && this.queued === 0 && bytes.length <= this.budget) {
      this.budget -= bytes.length;
      this.term.write(bytes);
      return;
    }
    this.queue.push(bytes);
    this.queued += bytes.length;
    // Here too, not only in drain: a hidden page gets no animation frames, and its queue
    // must stay bounded all the same.
    if (this.queued > limits.backlog) this.skipToTail(performance.now());
    wantFrame();
  }

  // Called once per frame by onFrame while output is queued.
  drain(now) {
    if (this.flooding) {
      if (now - this.lastDraw < limits.floodMs) return;
      this.lastDraw = now;
      if (this.queued > limits.tail) this.skipToTail(now);
      this.writeQueued(Infinity);
      this.notice.textContent = `falling behind: ${this.skippedNow} bytes of output skipped so far; showing the newest`;
      // A second with no output ends the flood (not a second with nothing to skip: reading at
      // the pane's pace, a flood can bring less than `tail` between two draws).
      if (this.queued === 0 && now - this.lastOutput > Math.max(1000, 3 * limits.floodMs)) {
        this.flooding = false;
        this.flash(`fell behind: ${this.skippedNow} bytes of output skipped`);
        this.skippedNow = 0;
      }
      return;
    }
    this.writeQueued(this.budget);
  }

  // Hands xterm.js queued chunks up to `max` bytes (whole chunks: at least one).
  writeQueued(max) {
    let n = 0;
    const parts = [];
    while (this.queue.length && (n === 0 || n + this.queue[0].length <= max)) {
      const c = this.queue.shift();
      parts.push(c);
      n += c.length;
    }
    if (!n) return;
    this.queued -= n;
    this.budget = Math.max(0, this.budget - n);
    if (parts.length === 1) { this.term.write(parts[0]); return; }
    const all = new Uint8Array(n);
    let at = 0;
    for (const c of parts) { all.set(c, at); at += c.length; }
    this.term.write(all);
  }

  // While the session prints faster than the server lets through, the server sends its screen
  // a few times a second instead of its bytes (docs/console-api.md, `screen`): the pane drops
  // what output it still holds (older than the screen), resets the terminal and draws the
  // screen. The last one of a flood says that bytes follow again, from its offset on.
  screen(m) {
    if (typeof m.data !== 'string') return;
    this.queue = [];
    this.queued = 0;
    this.flooding = false;
    this.term.reset();
    const cols = m.size?.cols, rows = m.size?.rows;
    if (!this.you && cols > 0 && rows > 0 && (cols !== this.term.cols || rows !== this.term.rows)) this.term.resize(cols, rows);
    this.term.write(m.data);
    this.screens++;
    this.screensOnly = !m.streaming;
    const skipped = Number(m.skipped) || 0;
    if (m.streaming) {
      this.skipped += skipped;
      this.screenSkipped = 0;
      this.flash(`printed faster than shown: ${skipped} bytes shown as screens only; live again`);
    } else {
      this.screenSkipped = skipped;
      clearTimeout(this.noticeTimer);
      this.notice.textContent = `printing faster than it can be shown: its screen a few times a second (${skipped} bytes so far)`;
    }
  }

  // Drops all queued output but the newest `tail` bytes, from the start of a line there (a
  // cut inside a line or a UTF-8 sequence would show as garbage; escape sequences that set a
  // mode before the cut are lost, as with any skip).
  skipToTail(now) {
    const all = new Uint8Array(this.queued);
    let at = 0;
    for (const c of this.queue) { all.set(c, at); at += c.length; }
    let from = Math.max(0, all.length - limits.tail);
    const nl = all.indexOf(0x0a, from);
    from = nl >= 0 && nl + 1 < all.length ? nl + 1 : from;
    const dropped = from;
    this.queue = [all.subarray(from)];
    this.queued = all.length - from;
    this.skipped += dropped;
    this.skippedNow += dropped;
    if (!this.flooding) {
      this.flooding = true;
      clearTimeout(this.noticeTimer);
      this.lastDraw = 0;
    }
  }

  // The server closes a socket whose message exceeds 64 KiB, and a paste can be longer: send
  // pieces of at most 8192 UTF-16 units (under 48 KiB of JSON even if every one is escaped
  // as \u00XX), never splitting a surrogate pair.
  sendInput(data) {
    for (let at = 0; at < data.length;) {
      let end = Math.min(data.length, at + 8192);
      const last = data.charCodeAt(end - 1);
      if (end < data.length && last >= 0xd800 && last <= 0xdbff) end--;
      this.send({ type: 'input', data: data.slice(at, end) });
      at = end;
    }
  }

  send(msg) {
    if (this.writer) this.writer.write(JSON.stringify(msg)).catch(() => { /* closed: said by closed() */ });
    else if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  onMessage(m) {
    switch (m.type) {
      case 'attached':
        this.mayControl = !!m.may_control && !!state.info?.may_control;
        this.sessionState = m.state;
        // Read-only, the terminal takes the session's size: its output is laid out for it.
        if (m.size?.cols > 0 && m.size?.rows > 0) this.term.resize(m.size.cols, m.size.rows);
        this.control(m.controller, m.controller_user, m.controller_since ?? null, !!m.you);
        break;
      case 'controller':
        this.control(m.controller, m.controller_user, m.since ?? null, !!m.you);
        break;
      case 'refused':
        if (m.code === 'read_only') this.flash(this.mayControl ? 'read-only: press “Take control” to type' : 'read-only: you may watch this session, not type in it');
        else this.flash(m.message || m.code);
        break;
      case 'screen':
        this.screen(m);
        break;
      case 'dropped':
        // While the pane skips on its own, the daemon's drops are part of the same count.
        if (this.flooding) { this.skipped += m.lost; this.skippedNow += m.lost; }
        else this.flash(`fell behind: ${m.lost} bytes of output skipped`);
        break;
      case 'exit':
        this.ended = true;
        this.you = false;
        this.setStatus(`exited${m.exit ? ` (${exitText(m.exit)})` : ''}`);
        this.showControl();
        this.take.hidden = true;
        break;
      case 'error':
        this.notice.textContent = `error: ${m.message || m.code}`;
        break;
      default:
        break;
    }
  }

  control(controller, user, since, you) {
    this.you = you;
    this.controller = controller;
    if (you) this.setStatus('You have control');
    else if (controller === 'supervisor') this.setStatus(`Read-only · ${controllerText(controller, user, since)} has control`);
    else this.setStatus('Read-only · the agent has control');
    this.showControl();
    if (you) {
      // A "read-only" notice from before the take no longer holds.
      clearTimeout(this.noticeTimer);
      if (!this.flooding) this.notice.textContent = '';
      this.lastSize = '';
      this.fitIfControlling();
      this.term.focus();
    }
  }

  showControl() {
    this.root.classList.toggle('controlling', this.you);
    this.take.hidden = !this.mayControl || this.you || this.ended;
    this.release.hidden = !this.you;
  }

  // While in control the session takes the pane's size (on take and whenever the pane resizes).
  fitIfControlling() {
    if (!this.you) return;
    try { this.fit.fit(); } catch { return; }
    const size = `${this.term.cols}x${this.term.rows}`;
    if (size === this.lastSize) return;
    this.lastSize = size;
    this.send({ type: 'resize', cols: this.term.cols, rows: this.term.rows });
  }

  setStatus(text) { this.status.textContent = text; this.root.dataset.status = text; }

  flash(text) {
    this.notice.textContent = text;
    clearTimeout(this.noticeTimer);
    this.noticeTimer = setTimeout(() => { this.notice.textContent = ''; }, 2500);
  }

  // The text on the terminal's screen and scrollback (tests and the benchmark read it).
  text() {
    const b = this.term.buffer.active;
    const lines = [];
    for (let i = 0; i < b.length; i++) lines.push(b.getLine(i)?.translateToString(true) ?? '');
    return lines.join('\n');
  }

  dispose() {
    this.ended = true;
    this.resizeObserver.disconnect();
    try { this.ws?.close(1000); } catch { /* already closed */ }
    try { this.wss?.close({ closeCode: 1000 }); } catch { /* already closed */ }
    this.term.dispose();
    this.root.remove();
    state.panes.delete(this.key);
    state.rows.get(this.id)?.tr.classList.remove('open');
    state.rows.get(this.id)?.cells.open.focus();
  }
}

class RecordingPane {
  constructor(id) {
    this.id = id;
    this.key = `play:${id}`;
    const f = paneFrame('recording', id, `recording of ${titleOf(id)}`);
    Object.assign(this, f);
    f.head.append(this.close);
    this.close.addEventListener('click', () => this.dispose());
    this.setStatus('loading…');
    if (!window.AsciinemaPlayer) { this.setStatus('player not loaded'); return; }
    this.player = window.AsciinemaPlayer.create(`api/sessions/${encodeURIComponent(id)}/recording`, this.body, {
      autoPlay: true, fit: 'width', idleTimeLimit: 2, terminalFontSize: '13px',
    });
    this.player.addEventListener('play', () => this.setStatus('playing'));
    this.player.addEventListener('playing', () => this.setStatus('playing'));
    this.player.addEventListener('pause', () => this.setStatus('paused'));
    this.player.addEventListener('ended', () => this.setStatus('ended'));
  }

  setStatus(text) { this.status.textContent = text; this.root.dataset.status = text; }

  dispose() {
    try { this.player?.dispose(); } catch { /* nothing left to free */ }
    this.root.remove();
    state.panes.delete(this.key);
    state.rows.get(this.id)?.cells.play.focus();
  }
}

function openPane(key, make) {
  const existing = state.panes.get(key);
  if (existing) { existing.root.scrollIntoView({ block: 'nearest' }); existing.close.focus(); return existing; }
  const pane = make();
  state.panes.set(key, pane);
  $('[data-role="panes"]').append(pane.root);
  if (pane.term) pane.term.focus();
  return pane;
}

function openLive(id) {
  openPane(`live:${id}`, () => new LivePane(id));
  state.rows.get(id)?.tr.classList.add('open');
}

function openRecording(id) { openPane(`play:${id}`, () => new RecordingPane(id)); }

// ---- start ---------------------------------------------------------------------------------

async function main() {
  try {
    const r = await fetch('api/info', { credentials: 'same-origin' });
    if (!r.ok) throw new Error(`api/info: HTTP ${r.status}`);
    state.info = await r.json();
    const who = $('[data-role="who"]');
    who.textContent = `${state.info.user} · ${state.info.role}${state.info.may_control ? ' (may take control)' : ' (watch only)'} · ${state.info.version}`;
    document.body.dataset.role = state.info.role;
    document.body.dataset.mayControl = String(!!state.info.may_control);
  } catch (e) {
    $('[data-role="who"]').textContent = `cannot reach the console's server: ${e.message}`;
  }
  connectEvents();
  document.body.dataset.ready = 'true';
}

main();
