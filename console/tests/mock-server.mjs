// A stand-in for `ptyvisor web` (docs/console-api.md) with fake sessions and no daemon, for
// developing the page and testing it alone in a browser. It keeps to the contract's routes,
// token, Host/Origin checks, headers and messages; the sessions are scripted: each prints a
// line on a timer, echoes what it is sent (as a terminal in cooked mode would), and records
// every input it receives in `inputs` so that a test can prove what reached "the session".
//
//   node tests/mock-server.mjs [--port N] [--role supervisor|observer]   (prints the URL)
//   import { startMock } from './mock-server.mjs'                       (tests)
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';

const assetsDir = fileURLToPath(new URL('../assets/', import.meta.url));
const contentTypes = {
  '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.svg': 'image/svg+xml',
  '.woff2': 'font/woff2', '.json': 'application/json',
};
export const CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; " +
  "img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'";

// --- WebSocket framing (RFC 6455), server side only, enough for the mock -----------------
const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

class WsConn {
  constructor(socket) {
    this.socket = socket;
    this.buf = Buffer.alloc(0);
    this.open = true;
    this.onmessage = () => {};
    this.onclose = () => {};
    socket.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.#parse(); });
    socket.on('close', () => { if (this.open) { this.open = false; this.onclose(); } });
    socket.on('error', () => {});
  }
  #parse() {
    for (;;) {
      if (this.buf.length < 2) return;
      const op = this.buf[0] & 0x0f;
      let len = this.buf[1] & 0x7f;
      let at = 2;
      if (len === 126) { if (this.buf.length < 4) return; len = this.buf.readUInt16BE(2); at = 4; }
      else if (len === 127) { if (this.buf.length < 10) return; len = Number(this.buf.readBigUInt64BE(2)); at = 10; }
      if (len > 64 * 1024) { this.close(1009); return; }
      if (this.buf.length < at + 4 + len) return;
      const mask = this.buf.subarray(at, at + 4);
      const payload = Buffer.from(this.buf.subarray(at + 4, at + 4 + len));
      for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
      this.buf = this.buf.subarray(at + 4 + len);
      if (op === 0x8) { this.close(1000); return; }
      if (op === 0x9) { this.#frame(0xa, payload); continue; }
      if (op === 0x1) {
        try { this.onmessage(JSON.parse(payload.toString('utf8'))); } catch { this.close(1003); return; }
      }
    }
  }
  #frame(op, payload) {
    if (!this.open) return;
    const n = payload.length;
    const head = n < 126 ? Buffer.from([0x80 | op, n])
      : n < 65536 ? Buffer.from([0x80 | op, 126, n >> 8, n & 255])
      : Buffer.concat([Buffer.from([0x80 | op, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
    this.socket.write(Buffer.concat([head, payload]));
  }
  json(obj) { this.#frame(0x1, Buffer.from(JSON.stringify(obj))); }
  binary(bytes) { this.#frame(0x2, Buffer.from(bytes)); }
  close(code = 1000) {
    if (!this.open) return;
    const b = Buffer.alloc(2); b.writeUInt16BE(code);
    this.#frame(0x8, b);
    this.open = false;
    this.socket.end();
    this.onclose();
  }
}

// --- fake sessions --------------------------------------------------------------------------
function fakeSession(id, argv, extra = {}) {
  return {
    id, argv, cwd: '/home/agent', state: 'running', exit: null,
    created: Math.floor(Date.now() / 1000) - 125, clients: 1, detached: true, start: 0, offset: 0,
    controller: 'agent', controller_user: null, controller_since: null,
    waiting_for_input: false, at_prompt: true, shell: 'bash',
    last_command: { seq: 3, command: 'make test', exit_code: 0, running: false },
    recording: false, ...extra,
  };
}

const sampleCast = [
  JSON.stringify({ version: 2, width: 80, height: 24, timestamp: 1764676800 }),
  JSON.stringify([0.1, 'o', '$ echo recorded\r\n']),
  JSON.stringify([0.2, 'o', 'this was recorded by ptyvisor\r\n']),
  JSON.stringify([0.3, 'o', '$ ']),
].join('\n') + '\n';

export async function startMock({ port = 0, role = 'supervisor', user = 'alice', tickMs = 1000 } = {}) {
  const token = randomBytes(32).toString('hex');
  const mayControl = role === 'supervisor' || role === 'root';
  const sessions = [
    fakeSession('a1b2c3d4e5f60718293a4b5c6d7e8f90', ['bash', '-l'], { recording: true }),
    fakeSession('0f1e2d3c4b5a69788796a5b4c3d2e1f0', ['python3', 'train.py', '--epochs', '3'],
      { waiting_for_input: true, at_prompt: false, last_command: { seq: 1, command: 'python3 train.py', exit_code: null, running: true } }),
    fakeSession('deadbeefdeadbeefdeadbeefdeadbeef', ['make', 'check'],
      { state: 'exited', exit: { status: 'exited', code: 2, reason: 'exited' }, controller: null, last_command: null }),
  ];
  const logs = new Map(sessions.map((s) => [s.id, Buffer.from(`\x1b[1mwelcome to ${s.argv.join(' ')}\x1b[0m\r\n$ `)]));
  const inputs = new Map(sessions.map((s) => [s.id, []]));
  const terminals = new Set();   // { ws, id, you }
  const eventSockets = new Set();

  const publicSession = (s) => ({ ...s, offset: logs.get(s.id).length });
  const sessionsMessage = () => ({ type: 'sessions', sessions: sessions.map(publicSession), role });
  const broadcastSessions = () => { for (const ws of eventSockets) ws.json(sessionsMessage()); };

  function output(id, bytes) {
    logs.set(id, Buffer.concat([logs.get(id), Buffer.from(bytes)]));
    for (const t of terminals) if (t.id === id) t.ws.binary(Buffer.from(bytes));
  }
  function setController(s, holder) {
    s.controller = holder ? 'supervisor' : 'agent';
    s.controller_user = holder ? user : null;
    s.controller_since = Date.now();
    for (const t of terminals) {
      if (t.id !== s.id) continue;
      t.you = t === holder;
      t.ws.json({ type: 'controller', controller: s.controller, controller_user: s.controller_user, since: s.controller_since, you: t.you });
    }
    broadcastSessions();
  }

  let ticks = 0;
  const timer = setInterval(() => {
    ticks++;
    for (const s of sessions) if (s.state === 'running') output(s.id, `tick ${ticks}\r\n`);
  }, tickMs);

  const tokenOk = (req, url) => {
    const given = url.searchParams.get('token') ??
      (req.headers.cookie ?? '').split(/;\s*/).find((c) => c.startsWith('ptyvisor_token='))?.slice(15);
    if (!given || given.length !== token.length) return false;
    return timingSafeEqual(Buffer.from(given), Buffer.from(token));
  };
  const hostOk = (req, actualPort) =>
    [`127.0.0.1:${actualPort}`, `localhost:${actualPort}`, `[::1]:${actualPort}`].includes(req.headers.host);
  const baseHeaders = {
    'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer', 'X-Frame-Options': 'DENY',
  };
  const forbidden = (res) => {
    res.writeHead(403, { ...baseHeaders, 'Content-Type': 'text/plain' });
    res.end('ptyvisor web: this page needs the token printed when the console started\n');
  };

  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, 'http://x');
      if (!hostOk(req, server.address().port) || !tokenOk(req, url)) return forbidden(res);
      if (req.method !== 'GET') { res.writeHead(405, baseHeaders); return res.end(); }
      if (url.pathname === '/' && url.searchParams.has('token')) {
        res.writeHead(303, { ...baseHeaders, Location: '/', 'Set-Cookie': `ptyvisor_token=${token}; HttpOnly; SameSite=Strict; Path=/` });
        return res.end();
      }
      const json = (obj) => { res.writeHead(200, { ...baseHeaders, 'Content-Type': 'application/json' }); res.end(JSON.stringify(obj)); };
      if (url.pathname === '/api/info') return json({ user, uid: 1000, role, may_control: mayControl, version: 'ptyvisor mock' });
      if (url.pathname === '/api/sessions') return json({ sessions: sessions.map(publicSession), role });
      const rec = url.pathname.match(/^\/api\/sessions\/([0-9a-f]+)\/recording$/);
      if (rec) {
        const s = sessions.find((x) => x.id === rec[1]);
        if (!s?.recording) { res.writeHead(404, baseHeaders); return res.end(); }
        res.writeHead(200, { ...baseHeaders, 'Content-Type': 'application/x-asciicast' });
        return res.end(sampleCast);
      }
      let file = null;
      if (url.pathname === '/') file = 'index.html';
      else if (url.pathname.startsWith('/assets/')) file = normalize(url.pathname.slice(8));
      if (file && !file.startsWith('..')) {
        try {
          const body = await readFile(join(assetsDir, file));
          const type = contentTypes[extname(file)] ?? 'application/octet-stream';
          const headers = { ...baseHeaders, 'Content-Type': type };
          if (type === 'text/html') headers['Content-Security-Policy'] = CSP;
          res.writeHead(200, headers);
          return res.end(body);
        } catch { /* fall through to 404 */ }
      }
      res.writeHead(404, baseHeaders);
      res.end();
    } catch {
      res.destroy();
    }
  });

  server.on('upgrade', (req, socket) => {
    const url = new URL(req.url, 'http://x');
    const port = server.address().port;
    const origin = req.headers.origin;
    let originHost = null;
    try { const o = new URL(origin); if (o.protocol === 'http:' || o.protocol === 'https:') originHost = o.host; } catch { /* refused below */ }
    if (!hostOk(req, port) || !tokenOk(req, url) || originHost !== req.headers.host) {
      socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    const accept = createHash('sha1').update(req.headers['sec-websocket-key'] + WS_GUID).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    const ws = new WsConn(socket);
    if (url.pathname === '/ws/events') {
      eventSockets.add(ws);
      ws.onclose = () => eventSockets.delete(ws);
      ws.json(sessionsMessage());
      return;
    }
    if (url.pathname !== '/ws/terminal') { ws.close(1008); return; }
    const s = sessions.find((x) => x.id === url.searchParams.get('id'));
    if (!s) { ws.json({ type: 'error', code: 'no_such_session', message: 'no such session' }); ws.close(1008); return; }
    const t = { ws, id: s.id, you: false };
    ws.json({
      type: 'attached', id: s.id, offset: 0, size: { cols: 80, rows: 24 }, state: s.state, may_control: mayControl,
      controller: s.controller ?? 'agent', controller_user: s.controller_user, you: false,
    });
    ws.binary(logs.get(s.id));
    if (s.state === 'exited') { ws.json({ type: 'exit', exit: s.exit }); ws.close(1000); return; }
    terminals.add(t);
    ws.onclose = () => { terminals.delete(t); if (t.you) setController(s, null); };
    ws.onmessage = (m) => {
      if (m.type === 'input' && typeof m.data === 'string') {
        if (!t.you) return ws.json({ type: 'refused', code: 'read_only', message: 'read-only: press "Take control" to type' });
        inputs.get(s.id).push(m.data);
        output(s.id, m.data.replace(/\r/g, '\r\n'));
      } else if (m.type === 'take') {
        if (!mayControl) return ws.json({ type: 'refused', code: 'not_allowed', message: 'only a supervisor may take control' });
        setController(s, t);
      } else if (m.type === 'release') {
        if (t.you) setController(s, null);
      } else if (m.type === 'resize') {
        if (t.you) t.size = { cols: m.cols, rows: m.rows };
      }
    };
  });

  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  const actual = server.address().port;
  return {
    url: `http://127.0.0.1:${actual}/?token=${token}`,
    origin: `http://127.0.0.1:${actual}`,
    token, sessions, inputs, terminals,
    output,
    exit(id, exit) {
      const s = sessions.find((x) => x.id === id);
      s.state = 'exited'; s.exit = exit; s.controller = null;
      for (const t of terminals) if (t.id === id) { t.ws.json({ type: 'exit', exit }); t.ws.close(1000); }
      broadcastSessions();
    },
    // The server's `screen` message (a flood shown as screens): to every pane of `id`.
    screen(id, fields) { for (const t of terminals) if (t.id === id) t.ws.json({ type: 'screen', ...fields }); },
    unavailable(message) { for (const ws of eventSockets) ws.json({ type: 'unavailable', message }); },
    update(id, fields) { Object.assign(sessions.find((x) => x.id === id), fields); broadcastSessions(); },
    async close() {
      clearInterval(timer);
      for (const t of terminals) t.ws.close(1001);
      for (const ws of eventSockets) ws.close(1001);
      server.closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
  const mock = await startMock({ port: Number(opt('--port', 0)), role: opt('--role', 'supervisor') });
  console.log(mock.url);
}
