// A node-pty-compatible core: spawn(file, args, options) returns an IPty (pid, cols, rows,
// process, onData, onExit, write, resize, kill, pause, resume), so code written for node-pty,
// @lydell/node-pty or bun-pty switches by changing its import. The terminal is a ptyvisor
// session bound to this process: kill, or this process's end, ends it, as closing a pty would.
//
// One difference: node-pty forks in spawn() and knows the pid at once; here the daemon starts
// the command, so `pid` is 0 until the session has started (`ready` resolves then; 'data' never
// comes before it). Input written earlier is sent after START and held by the daemon.
import { EventEmitter } from "node:events";
import { StringDecoder } from "node:string_decoder";
import { Client, startVersionError } from "./client.js";
import type { Screen, SnapshotOptions } from "./screen.js";
import { type Session, signalNumber } from "./session.js";
import type { ExitInfo } from "./types.js";

export interface IDisposable {
  dispose(): void;
}

export interface IEvent<T> {
  (listener: (e: T) => unknown): IDisposable;
}

export interface IPtyForkOptions {
  /** TERM (default "xterm", as node-pty). */
  name?: string;
  cols?: number;
  rows?: number;
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Output decoding (default utf8); null gives Buffers. */
  encoding?: BufferEncoding | null;
  /** ptyvisor only: the daemon's socket (default PTYVISOR_SOCKET). */
  socketPath?: string;
  /** ptyvisor only: the sandbox profile to run under (protocol 13; see StartOptions.profile). */
  profile?: string;
}

export interface IExitEvent {
  exitCode: number;
  signal?: number;
}

export interface IPty {
  readonly pid: number;
  readonly cols: number;
  readonly rows: number;
  readonly process: string;
  handleFlowControl: boolean;
  readonly onData: IEvent<string>;
  readonly onExit: IEvent<IExitEvent>;
  write(data: string | Buffer): void;
  resize(columns: number, rows: number): void;
  clear(): void;
  kill(signal?: string): void;
  pause(): void;
  resume(): void;
}

/** The IPty of a ptyvisor session, with what node-pty does not have: `ready`, `session`, `snapshot`. */
export interface PtyvisorPty extends IPty {
  readonly ready: Promise<void>;
  readonly session: Session;
  /** What the terminal shows now, as xterm.js's buffer would (the daemon's emulator; see Client.snapshot). */
  snapshot(options?: SnapshotOptions): Promise<Screen>;
}

function eventOf<T>(emitter: EventEmitter, name: string): IEvent<T> {
  return (listener) => {
    const call = (value: T) => void listener(value);
    emitter.on(name, call);
    return { dispose: () => void emitter.off(name, call) };
  };
}

/** node-pty's exit event: the code, and the signal that ended the command (0 when none). */
export function exitEvent(exit: ExitInfo | null): IExitEvent {
  if (!exit) return { exitCode: 1, signal: 0 };
  if (exit.status === "exited") return { exitCode: exit.code ?? 0, signal: 0 };
  if (exit.status === "signaled") return { exitCode: 0, signal: exit.signal ?? 0 };
  return { exitCode: 255, signal: 0 };
}

class SessionPty implements PtyvisorPty {
  cols: number;
  rows: number;
  readonly process: string;
  handleFlowControl = false;
  readonly onData: IEvent<string>;
  readonly onExit: IEvent<IExitEvent>;
  readonly ready: Promise<void>;
  private readonly events = new EventEmitter();
  private ended = false;

  constructor(
    file: string,
    readonly session: Session,
    ready: Promise<void>,
    cols: number,
    rows: number,
    encoding: BufferEncoding | null,
  ) {
    this.process = file;
    this.cols = cols;
    this.rows = rows;
    this.ready = ready;
    const decoder = encoding === null ? null : new StringDecoder(encoding);
    session.on("data", (chunk) => this.events.emit("data", decoder ? decoder.write(chunk) : chunk));
    session.exited.then(
      (exit) => this.finish(exit),
      () => this.finish(null),
    );
    this.onData = eventOf<string>(this.events, "data");
    this.onExit = eventOf<IExitEvent>(this.events, "exit");
  }

  get pid(): number {
    return this.session.pid;
  }

  write(data: string | Buffer): void {
    if (!this.ended) this.session.write(data);
  }

  resize(columns: number, rows: number): void {
    if (!(columns >= 1 && rows >= 1 && Number.isInteger(columns) && Number.isInteger(rows))) {
      throw new Error("resizing must be done using positive cols and rows");
    }
    this.cols = columns;
    this.rows = rows;
    if (!this.ended) this.session.resize(columns, rows);
  }

  clear(): void {}

  /** Sends the signal (default SIGHUP, as node-pty) to every process of the session. */
  kill(signal = "SIGHUP"): void {
    if (!this.ended) this.session.signal(signalNumber(signal), "session");
  }

  pause(): void {
    this.session.pauseOutput(true);
  }

  snapshot(options?: SnapshotOptions): Promise<Screen> {
    return this.session.snapshot(options);
  }

  resume(): void {
    this.session.pauseOutput(false);
  }

  private finish(exit: ExitInfo | null): void {
    this.ended = true;
    this.events.emit("exit", exitEvent(exit));
  }
}

/** node-pty's spawn: starts `file args` on a new terminal, as a ptyvisor session. */
export function spawn(file: string, args: string[] | string = [], options: IPtyForkOptions = {}): PtyvisorPty {
  const argv = [file, ...(typeof args === "string" ? args.split(" ").filter(Boolean) : args)];
  const client = new Client({ socketPath: options.socketPath });
  const cols = options.cols ?? 80;
  const rows = options.rows ?? 24;
  const connection = client.connectStart(argv, {
    cwd: options.cwd,
    env: options.env,
    term: options.name ?? "xterm",
    cols,
    rows,
    profile: options.profile,
  });
  const session = client.openNow(connection);
  // A daemon without version 6 refuses a profile's START: say so, as Client.open() does.
  const ready = session.ready.catch((e: unknown) => {
    throw startVersionError(e, { profile: options.profile });
  });
  ready.catch(() => {}); // as Session.ready: a caller that never awaits it is not an unhandled rejection
  return new SessionPty(file, session, ready, cols, rows, options.encoding === undefined ? "utf8" : options.encoding);
}
