// The end-to-end suite's access to the real system that console/test.sh set up: a ptyvisord
// (PTYVISOR_SOCKET), the CLI (PTYVISOR_BIN), the agent's account and the two person groups.
// `ptyvisor web` runs as `nobody` (never root), with the agent's group to reach the socket.
import { execFile, spawn } from 'node:child_process';
import { request } from 'node:http';
import { createInterface } from 'node:readline';

// A WebSocket client for Node (console/node_modules: resolvable from here, not from bench/).
export { default as WebSocket } from 'ws';

export const env = {
  socket: process.env.PTYVISOR_SOCKET,
  bin: process.env.PTYVISOR_BIN,
  agent: process.env.CONSOLE_AGENT,
  supervisors: process.env.CONSOLE_SUPERVISOR_GROUP,
  observers: process.env.CONSOLE_OBSERVER_GROUP,
};

// Fails (rather than skips) when run outside console/test.sh.
export function requireEnv() {
  for (const [k, v] of Object.entries(env)) {
    if (!v) throw new Error(`${k} is not set: run the end-to-end suite through console/test.sh BUILD_DIR`);
  }
}

const SESSION_PATH = '/usr/local/bin:/usr/bin:/bin';

// `ptyvisor ARGS` as the agent; resolves { code, stdout, stderr } whatever the exit code.
export function agent(args, { timeout = 20_000 } = {}) {
  return new Promise((resolve) => {
    execFile('runuser', ['-u', env.agent, '--', 'env', `PTYVISOR_SOCKET=${env.socket}`, `PATH=${SESSION_PATH}`,
      'HOME=/tmp', 'TERM=xterm-256color', env.bin, ...args], { timeout, cwd: '/' }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

// Starts a detached session as the agent; returns its id.
export async function startSession(argv) {
  const r = await agent(['run', '--detach', '--', ...argv]);
  if (r.code !== 0) throw new Error(`ptyvisor run --detach failed (${r.code}): ${r.stderr}`);
  const id = r.stdout.trim().split('\n').pop().trim();
  if (!/^[0-9a-f]{8,}$/.test(id)) throw new Error(`ptyvisor run --detach printed ${JSON.stringify(r.stdout)}`);
  return id;
}

// `ptyvisor web --listen 127.0.0.1:0` as a person: `role` "supervisor" or "observer" picks
// the group. Resolves { url, origin, base, token, stop() } once it printed its URL.
export function startWeb(role, extraArgs = []) {
  const group = role === 'supervisor' ? env.supervisors : env.observers;
  const child = spawn('setpriv', ['--reuid=nobody', '--regid=nogroup', `--groups=${env.agent},${group}`, '--',
    'env', `PTYVISOR_SOCKET=${env.socket}`, 'HOME=/', `PATH=${SESSION_PATH}`,
    (process.env.WEB_BIN ?? env.bin), 'web', '--listen', '127.0.0.1:0', '--socket', env.socket, ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const lines = createInterface({ input: child.stdout });
  return new Promise((resolve, reject) => {
    const fail = (why) => reject(new Error(`ptyvisor web ${why}; stderr: ${stderr}`));
    const timer = setTimeout(() => { child.kill('SIGKILL'); fail('printed no URL in 10 s'); }, 10_000);
    child.on('exit', (code) => { clearTimeout(timer); fail(`exited with ${code} before printing its URL`); });
    lines.once('line', (line) => {
      clearTimeout(timer);
      const url = new URL(line.trim());
      resolve({
        url: url.href, origin: url.origin, base: `${url.origin}/`, token: url.searchParams.get('token'), child,
        stderr: () => stderr,
        stop: () => new Promise((done) => {
          if (child.exitCode !== null) return done();
          child.removeAllListeners('exit');
          child.on('exit', () => done());
          child.kill('SIGTERM');
        }),
      });
    });
  });
}

// A raw HTTP GET (no browser) with the given headers: { status, headers, body }. With
// `upgrade`, it asks for a WebSocket and resolves on the answer (101 or a refusal).
export function rawGet(origin, path, headers = {}, { upgrade = false } = {}) {
  const u = new URL(path, origin);
  const h = { ...headers };
  if (upgrade) Object.assign(h, { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==' });
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname + u.search, headers: h, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('upgrade', (res, socket) => { socket.destroy(); resolve({ status: res.statusCode, headers: res.headers, body: '' }); });
    req.on('error', reject);
    req.end();
  });
}
