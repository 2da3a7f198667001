// The session calls of protocol version 2 (docs/protocol.md, section 9): start detached,
// attach, list, read, wait, kill, send; the screen of version 3 (section 10): snapshot; and the
// commands of version 4 (section 11): exec, commands, watch, wait for a command, a prompt or
// input. Each call is one connection; each takes an AbortSignal that closes it (a WAIT so
// cancelled is dropped by the daemon). Only the calls that need a newer version negotiate it:
// the rest work against any daemon of version 2. A START speaks version 6 (section 13) only
// when it names a sandbox profile, version 4 only with shell integration.
import fs from "node:fs";
import { ConnectionLostError, ProtocolError, PtyvisorError, ServerError, UnsupportedVersionError } from "./errors.js";
import { Connection, expectJson, resolveSocketPath } from "./connection.js";
import { COMMANDS_PROTOCOL_VERSION, encodeFrame, FrameType, MAX_IO_PAYLOAD, PROFILES_PROTOCOL_VERSION, SCREEN_PROTOCOL_VERSION } from "./frame.js";
import { sendfd } from "./native.js";
import { commandList, executed, killed, logHeader, sessionInfo, started, waited } from "./parse.js";
import { parseScreen, type Screen, type SnapshotOptions } from "./screen.js";
import { Session, signalNumber } from "./session.js";
import type { CommandList, ExecResult, KilledResult, Position, ReadResult, SessionInfo, StartedInfo, WaitResult } from "./types.js";
import { Watch } from "./watch.js";

export interface ClientOptions {
  /** The daemon's socket; default PTYVISOR_SOCKET, else /run/ptyvisor/ptyvisor.sock. */
  socketPath?: string;
}

export interface StartOptions {
  /** The command's directory (default: this process's). Sent as an open descriptor. */
  cwd?: string;
  /** The command's environment (default: this process's). */
  env?: Record<string, string | undefined> | string[];
  /** TERM for the session (default xterm-256color). */
  term?: string;
  rows?: number;
  cols?: number;
  /**
   * Start the shell with the daemon's integration script (11.2), for exec(), commands() and
   * the command events: argv[0] must name bash or zsh, with no arguments but -i, -l or --login.
   * Needs protocol version 4 (the START is sent in it).
   */
  shellIntegration?: boolean;
  /**
   * The sandbox profile to run the command under (13.1; default: the daemon's
   * default_profile). One the configuration does not offer is ServerError
   * `profile_not_allowed`, one this host cannot enforce `profile_unavailable`. Needs protocol
   * version 6 (the START is sent in it only when a profile is named).
   */
  profile?: string;
  signal?: AbortSignal;
}

export interface OpenOptions extends StartOptions {
  /** true: the session outlives this connection (default false: closing it ends the session). */
  detach?: boolean;
}

export interface AttachOptions {
  role?: "controller" | "observer";
  /** Where the output begins (default "tail": only new output). */
  from?: Position;
  /** Take the place of an attached controller (which is told and closed). */
  takeover?: boolean;
  signal?: AbortSignal;
}

export type WaitOptions = { timeoutMs?: number; signal?: AbortSignal } & (
  | { for?: "exit" }
  | { for: "quiet"; quietMs: number }
  | { for: "text"; pattern: string; from?: Position }
  /**
   * Version 4 (11.5): until a command with a seq above `after` has ended (default: the newest
   * ended one when the WAIT arrives, i.e. the next command to end). After an exec() that
   * returned "waiting_for_input" or "timeout", pass `after: result.seq - 1`.
   */
  | { for: "command"; after?: number }
  /** Version 4: until the shell shows its prompt. */
  | { for: "prompt" }
  /** Version 4: until the session waits for input (its shell's prompt included). */
  | { for: "input" }
);

export interface ExecOptions {
  /** Bounds the whole EXEC on the daemon: waiting for the prompt and for the command (default 30000). */
  timeoutMs?: number;
  /** At the timeout, send Ctrl-C and wait up to 5 s more for the command's end (state "interrupted"). */
  interrupt?: boolean;
  /** The most output bytes read back (default 16 MiB): past it, `output` is the head and `truncated` is set. */
  maxOutputBytes?: number;
  signal?: AbortSignal;
}


export interface ReadOptions {
  from?: Position;
  maxBytes?: number;
  signal?: AbortSignal;
}

export interface KillOptions {
  /** A signal for every process of the session; without it the session is stopped and KILL waits for its end. */
  signal?: number | string;
  abort?: AbortSignal;
}

const ID = /^[0-9a-f]{32}$/;
/** exec()'s default bound on the output it reads back. */
const DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** READ's bound on max_bytes (9.6). */
const MAX_READ_BYTES = 64 * 1024 * 1024;
/** The new WAIT conditions of version 4, as UnsupportedVersionError names them. */
const WAIT_FEATURES: Record<string, string> = { command: "waiting for a command", prompt: "waiting for a prompt", input: "waiting for input" };
/** SNAPSHOT's bound on `scrollback` (10.2); the daemon keeps at most 1000 lines anyway. */
const MAX_SCROLLBACK = 10000;

function checkId(id: string): void {
  if (!ID.test(id)) throw new PtyvisorError(`not a session id: ${JSON.stringify(id)}`);
}

export class Client {
  readonly socketPath: string;

  constructor(options: ClientOptions = {}) {
    this.socketPath = resolveSocketPath(options.socketPath);
  }

  /** Starts a detached session and returns its id, unit and pid; it runs on after this call. */
  async start(argv: string[], options: StartOptions = {}): Promise<StartedInfo> {
    const conn = await this.connectStart(argv, { ...options, detach: true });
    try {
      return started(await conn.reply(FrameType.STARTED, "START", options.signal));
    } catch (e) {
      throw startVersionError(e, options);
    } finally {
      conn.close();
    }
  }

  /** Starts a session and stays attached as its controller. Resolves once it has started. */
  async open(argv: string[], options: OpenOptions = {}): Promise<Session> {
    const session = this.openNow(this.connectStart(argv, options), options.signal);
    try {
      await session.ready;
    } catch (e) {
      throw startVersionError(e, options);
    }
    return session;
  }

  /** Attaches to a session, as controller (default) or observer. */
  async attach(id: string, options: AttachOptions = {}): Promise<Session> {
    checkId(id);
    const conn = await Connection.open(this.socketPath, options.signal);
    conn.sendJson(FrameType.ATTACH, {
      id,
      from: options.from ?? "tail",
      role: options.role ?? "controller",
      takeover: options.takeover ?? false,
    });
    const session = new Session(conn, this);
    closeOnAbort(session, options.signal);
    await session.ready;
    return session;
  }

  /** The sessions the daemon knows, oldest first (running, and exited within retention). */
  async list(options: { signal?: AbortSignal } = {}): Promise<SessionInfo[]> {
    const body = await this.request(FrameType.LIST, null, FrameType.SESSIONS, options.signal);
    if (!Array.isArray(body.sessions)) throw new ProtocolError("SESSIONS: no sessions array");
    return body.sessions.map((s: unknown) => sessionInfo(s as Record<string, unknown>));
  }

  /** Reads a session's log without waiting (default from its start, at most 1 MiB). */
  async read(id: string, options: ReadOptions = {}): Promise<ReadResult> {
    checkId(id);
    const request: Record<string, unknown> = { id, from: options.from ?? "start" };
    if (options.maxBytes !== undefined) request.max_bytes = options.maxBytes;
    const conn = await Connection.open(this.socketPath, options.signal);
    try {
      conn.sendJson(FrameType.READ, request);
      const header = logHeader(await conn.reply(FrameType.LOG, "READ", options.signal));
      const chunks: Buffer[] = [];
      let got = 0;
      while (got < header.length) {
        const frame = await conn.nextFrame(options.signal);
        if (!frame) throw new ProtocolError(`LOG: ${got} of ${header.length} bytes before the end`);
        if (frame.type !== FrameType.OUTPUT) throw new ProtocolError(`LOG: unexpected frame type ${frame.type}`);
        chunks.push(frame.payload);
        got += frame.payload.length;
      }
      if (got !== header.length) throw new ProtocolError(`LOG: ${got} bytes for a length of ${header.length}`);
      const { length: _length, ...rest } = header;
      return { ...rest, data: Buffer.concat(chunks), more: header.offset + header.length < header.end };
    } finally {
      conn.close();
    }
  }

  /** Waits, on the daemon, for the session's exit, a quiet spell, or a pattern (RE2) in its log. */
  /**
   * Waits, on the daemon, for the session's exit, a quiet spell, or a pattern (RE2) in its log;
   * or, in version 4 (rejecting with UnsupportedVersionError before it), for a command's end, a
   * prompt, or a wait for input.
   */
  async wait(id: string, options: WaitOptions = {}): Promise<WaitResult> {
    checkId(id);
    const request: Record<string, unknown> = { id, for: options.for ?? "exit" };
    if (options.timeoutMs !== undefined) request.timeout_ms = options.timeoutMs;
    if (options.for === "quiet") request.quiet_ms = options.quietMs;
    if (options.for === "text") {
      request.pattern = options.pattern;
      if (options.from !== undefined) request.from = options.from;
    }
    if (options.for === "command" && options.after !== undefined) request.after = options.after;
    if (options.for !== undefined && Object.hasOwn(WAIT_FEATURES, options.for)) {
      const body = await this.requestV4(FrameType.WAIT, request, FrameType.WAITED, WAIT_FEATURES[options.for], options.signal);
      return waited(body);
    }
    return waited(await this.request(FrameType.WAIT, request, FrameType.WAITED, options.signal));
  }

  /**
   * Runs one command line in the session's shell, as if typed, and resolves when it has ended
   * (EXEC, 11.4), with its exit code and its output read back from the log. The session must
   * have shell integration (start it with `shellIntegration: true`), else ServerError
   * `no_shell_integration`; another exec() running in it is ServerError `busy`. A command that
   * waits for input comes back as state "waiting_for_input": answer with send(), then
   * `wait(id, { for: "command", after: result.seq - 1 })`.
   */
  async exec(id: string, command: string, options: ExecOptions = {}): Promise<ExecResult> {
    checkId(id);
    const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < 0) {
      throw new PtyvisorError(`maxOutputBytes must be a non-negative integer, not ${maxOutputBytes}`);
    }
    const request: Record<string, unknown> = { id, command };
    if (options.timeoutMs !== undefined) request.timeout_ms = options.timeoutMs;
    if (options.interrupt !== undefined) request.interrupt = options.interrupt;
    const reply = executed(await this.requestV4(FrameType.EXEC, request, FrameType.EXECUTED, "exec (commands in a shell)", options.signal));
    let output: Buffer = Buffer.alloc(0);
    let truncated = false;
    if (reply.record) {
      // A command that still runs has written, so far, up to the log's end at the reply.
      const end = reply.record.outputEnd ?? Math.max(reply.record.outputStart, reply.offset);
      ({ output, truncated } = await this.readRange(id, reply.record.outputStart, end, maxOutputBytes, options.signal));
    }
    return {
      ...reply,
      seq: reply.record?.seq ?? null,
      output,
      text: output.toString("utf8").replace(/\r\n/g, "\n"),
      truncated,
    };
  }

  /** The session's command records with a seq above `since` (COMMANDS, 11.3), and where its shell is. */
  async commands(id: string, options: { since?: number; signal?: AbortSignal } = {}): Promise<CommandList> {
    checkId(id);
    const request: Record<string, unknown> = { id };
    if (options.since !== undefined) request.since = options.since;
    return commandList(await this.requestV4(FrameType.COMMANDS, request, FrameType.COMMAND_LIST, "command records", options.signal));
  }

  /**
   * Subscribes to the session's events (WATCH, 11.6): `for await (const event of watch)`, or
   * `watch.on("command_end", ...)`. It ends after the "exit" event; close() (or a `break`)
   * ends it earlier. Failures (no_such_session, UnsupportedVersionError before version 4)
   * come through the iterator, `done` and the 'error' event.
   */
  watch(id: string, options: { signal?: AbortSignal } = {}): Watch {
    checkId(id);
    const watch = new Watch(Connection.open(this.socketPath, options.signal, COMMANDS_PROTOCOL_VERSION), id);
    const signal = options.signal;
    if (signal) {
      const onAbort = () => watch.close();
      if (signal.aborted) watch.close();
      else signal.addEventListener("abort", onAbort, { once: true });
      watch.done.finally(() => signal.removeEventListener("abort", onAbort)).catch(() => {});
    }
    return watch;
  }

  /** Stops a session (and waits for its end), or sends a signal to all of its processes. */
  async kill(id: string, options: KillOptions = {}): Promise<KilledResult> {
    checkId(id);
    const request: Record<string, unknown> = { id };
    if (options.signal !== undefined) request.signal = signalNumber(options.signal);
    return killed(await this.request(FrameType.KILL, request, FrameType.KILLED, options.abort));
  }

  /** Writes input to a session without attaching (like tmux send-keys); returns the bytes taken. */
  async send(id: string, data: string | Uint8Array, options: { signal?: AbortSignal } = {}): Promise<number> {
    checkId(id);
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data);
    let total = 0;
    for (let at = 0; at < bytes.length || at === 0; at += MAX_IO_PAYLOAD) {
      const piece = bytes.subarray(at, at + MAX_IO_PAYLOAD);
      if (piece.length === 0) throw new PtyvisorError("send: no bytes to send");
      const payload = Buffer.concat([Buffer.from(id, "ascii"), piece]);
      const body = await this.request(FrameType.SEND, payload, FrameType.SENT, options.signal);
      const sent = body.bytes;
      if (typeof sent !== "number") throw new ProtocolError("SENT: no bytes member");
      total += sent;
    }
    return total;
  }

  /**
   * What the session's terminal shows now (SNAPSHOT, protocol version 3): its rows as text (as
   * `tmux capture-pane -p`), the cursor, the title, the alternate screen, and on request the
   * scrollback and the colours. The screen covers every byte the session wrote before the
   * request arrived (`offset`). Own connection, in version 3: against a daemon of version 2 it
   * rejects with UnsupportedVersionError; an unknown id is ServerError `no_such_session`, a
   * screen that is not available now (its worker restarting) ServerError `internal`: ask again.
   */
  async snapshot(id: string, options: SnapshotOptions = {}): Promise<Screen> {
    checkId(id);
    const scrollback = options.scrollback ?? 0;
    if (!Number.isInteger(scrollback) || scrollback < 0 || scrollback > MAX_SCROLLBACK) {
      throw new PtyvisorError(`scrollback must be an integer 0..${MAX_SCROLLBACK}, not ${scrollback}`);
    }
    const attributes = options.attributes ?? false;
    const request: Record<string, unknown> = { id };
    if (scrollback > 0) request.scrollback = scrollback;
    if (attributes) request.attributes = true;
    const conn = await Connection.open(this.socketPath, options.signal, SCREEN_PROTOCOL_VERSION);
    try {
      conn.sendJson(FrameType.SNAPSHOT, request);
      const frame = await conn.nextFrame(options.signal);
      if (!frame) throw new ConnectionLostError("SNAPSHOT: the daemon closed the connection without a reply");
      let body: Record<string, unknown>;
      try {
        body = expectJson(frame, FrameType.SCREEN, "SNAPSHOT");
      } catch (e) {
        // A daemon of version 2 refuses our first frame's version (section 8), in a version 1 ERROR.
        if (e instanceof ServerError && e.code === "unsupported_version") {
          throw new UnsupportedVersionError("screen snapshots", SCREEN_PROTOCOL_VERSION, e.serverMessage);
        }
        throw e;
      }
      return parseScreen(body, { id, scrollback, attributes });
    } finally {
      conn.close();
    }
  }

  /**
   * The log's bytes [from, to), at most maxBytes of them (the head), paging through LOG replies
   * (each bounded by the daemon's reply budget, 9.6). `truncated`: bytes of the range are not in
   * `output`, left out past maxBytes or already dropped from the log.
   */
  private async readRange(id: string, from: number, to: number, maxBytes: number, signal?: AbortSignal) {
    let truncated = to - from > maxBytes;
    const end = Math.min(to, from + maxBytes);
    const chunks: Buffer[] = [];
    let at = from;
    while (at < end) {
      const part = await this.read(id, { from: at, maxBytes: Math.min(end - at, MAX_READ_BYTES), signal });
      if (part.offset > at) truncated = true; // dropped from the log before we read them
      if (part.offset >= end || part.data.length === 0) {
        if (part.offset < end) truncated = true;
        break;
      }
      const data = part.data.subarray(0, end - part.offset);
      chunks.push(data);
      at = part.offset + data.length;
    }
    return { output: Buffer.concat(chunks), truncated };
  }

  /** Internal to the package (spawn): a session whose STARTED is still on its way. */
  openNow(conn: Connection | Promise<Connection>, signal?: AbortSignal): Session {
    const session = new Session(conn, this);
    closeOnAbort(session, signal);
    return session;
  }

  /** Connects and sends START with the directory's descriptor (section 5.1). */
  async connectStart(argv: string[], options: OpenOptions): Promise<Connection> {
    const payload = startPayload(argv, options);
    const version = startVersion(options);
    const conn = await Connection.open(this.socketPath, options.signal, version);
    try {
      sendStart(conn, payload, options.cwd ?? process.cwd());
      return conn;
    } catch (e) {
      conn.close();
      throw e;
    }
  }

  /** One request and its reply on a connection of version 4; a daemon without it is UnsupportedVersionError. */
  private async requestV4(type: number, body: object, reply: number, feature: string, signal?: AbortSignal) {
    const conn = await Connection.open(this.socketPath, signal, COMMANDS_PROTOCOL_VERSION);
    try {
      conn.sendJson(type, body);
      return await conn.reply(reply, `request type ${type}`, signal);
    } catch (e) {
      throw versionError(e, feature);
    } finally {
      conn.close();
    }
  }

  private async request(type: number, body: object | Buffer | null, reply: number, signal?: AbortSignal) {
    const conn = await Connection.open(this.socketPath, signal);
    try {
      if (body === null) conn.send(type);
      else if (Buffer.isBuffer(body)) conn.send(type, body);
      else conn.sendJson(type, body);
      const frame = await conn.nextFrame(signal);
      if (!frame) throw new ProtocolError(`request type ${type}: the daemon closed without a reply`);
      return expectJson(frame, reply, `request type ${type}`);
    } finally {
      conn.close();
    }
  }
}

/** START's JSON without cwd_dev/cwd_ino, which are added once the directory is open. */
function startPayload(argv: string[], options: OpenOptions): Record<string, unknown> {
  if (argv.length === 0 || argv[0] === "") throw new PtyvisorError("argv[0] must be a non-empty command");
  const payload: Record<string, unknown> = {
    argv,
    env: envEntries(options.env ?? process.env),
    term: options.term ?? "xterm-256color",
    rows: options.rows ?? 24,
    cols: options.cols ?? 80,
  };
  if (options.detach) payload.detach = true;
  if (options.shellIntegration) payload.shell_integration = true;
  if (options.profile !== undefined) payload.profile = checkProfile(options.profile);
  return payload;
}

/** START's `profile` bound (13.1). */
const MAX_PROFILE_BYTES = 64;

/** A name the daemon could judge; whether it is allowed is the daemon's answer (profile_not_allowed). */
function checkProfile(profile: unknown): string {
  if (typeof profile !== "string" || profile === "" || Buffer.byteLength(profile, "utf8") > MAX_PROFILE_BYTES) {
    throw new PtyvisorError(`a profile is a name of 1 to ${MAX_PROFILE_BYTES} bytes, not ${JSON.stringify(profile)}`);
  }
  return profile;
}

/**
 * START's connection version: the oldest that reads every member it carries. `profile` is read
 * in version 6 only (13.1), `shell_integration` from version 4 (11): an older connection
 * ignores them, so the session would run without what was asked for.
 */
function startVersion(options: StartOptions): number | undefined {
  if (options.profile !== undefined) return PROFILES_PROTOCOL_VERSION;
  return options.shellIntegration ? COMMANDS_PROTOCOL_VERSION : undefined;
}

/** A daemon's refusal of a START's version, naming the option that needed it. */
export function startVersionError(e: unknown, options: StartOptions): unknown {
  if (options.profile !== undefined) return versionError(e, "sandbox profiles", PROFILES_PROTOCOL_VERSION);
  return options.shellIntegration ? versionError(e, "shell integration") : e;
}

/** NAME=VALUE entries; names the protocol refuses (empty, with "=") are left out. */
function envEntries(env: Record<string, string | undefined> | string[]): string[] {
  if (Array.isArray(env)) return env;
  const out: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || name === "" || name.includes("=") || name.includes("\0") || value.includes("\0")) continue;
    out.push(`${name}=${value}`);
  }
  return out;
}

/**
 * Sends START with the directory's descriptor on the first byte (section 5.1). The device
 * and inode are 64-bit: they are read as bigints and written into the JSON as integers.
 */
function sendStart(conn: Connection, payload: Record<string, unknown>, cwd: string): void {
  const dirFd = fs.openSync(cwd, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  try {
    const st = fs.fstatSync(dirFd, { bigint: true });
    const json = JSON.stringify(payload);
    const text = `${json.slice(0, -1)},"cwd_dev":${st.dev.toString()},"cwd_ino":${st.ino.toString()}}`;
    const frame = encodeFrame(FrameType.START, Buffer.from(text, "utf8"), conn.version);
    const sent = sendfd().sendWithFd(conn.fd, frame, dirFd);
    // sent < 0: the daemon already closed (it refused us); its ERROR is read as the reply.
    if (sent > 0 && sent < frame.length) conn.writeRaw(frame.subarray(sent));
  } finally {
    fs.closeSync(dirFd);
  }
}

/** A daemon older than `version` refuses the first frame's version (section 8): say which feature it lacks. */
function versionError(e: unknown, feature: string, version = COMMANDS_PROTOCOL_VERSION): unknown {
  if (e instanceof ServerError && !(e instanceof UnsupportedVersionError) && e.code === "unsupported_version") {
    return new UnsupportedVersionError(feature, version, e.serverMessage);
  }
  return e;
}

function closeOnAbort(session: Session, signal?: AbortSignal): void {
  if (!signal) return;
  if (signal.aborted) return session.close();
  const onAbort = () => session.close();
  signal.addEventListener("abort", onAbort, { once: true });
  session.exited.finally(() => signal.removeEventListener("abort", onAbort)).catch(() => {});
}
