// An attached connection to a session: a controller (started here, or attached) or an observer.
// Output arrives as 'data' events and through async iteration; the session's end as 'exit' and
// the `exited` promise. Invariant: 'exit' is emitted once, after every 'data' of the session.
import { EventEmitter } from "node:events";
import { constants as osConstants } from "node:os";
import { ConnectionLostError, ProtocolError, PtyvisorError } from "./errors.js";
import { type Connection, serverError } from "./connection.js";
import { FrameType, MAX_IO_PAYLOAD, parseJsonObject } from "./frame.js";
import { attached, exitInfo, int, started, str } from "./parse.js";
import type { Screen, SnapshotOptions } from "./screen.js";
import type { AttachedInfo, ExitInfo } from "./types.js";

/** What takes a session's screen: the Client (a separate connection, in protocol version 3). */
export interface Snapshotter {
  snapshot(id: string, options?: SnapshotOptions): Promise<Screen>;
}

export type SignalTarget = "foreground" | "session";

/** How many output chunks an async iterator may hold before the session stops reading. */
const ITERATOR_HIGH_WATER = 64;

export interface SessionEvents {
  started: [info: { id: string; unit: string; pid: number }];
  data: [chunk: Buffer];
  dropped: [info: { offset: number; lost: number }];
  exit: [exit: ExitInfo];
  detached: [info: { offset: number; reason: string }];
  /**
   * Version 5 and later (a START with a profile speaks 6): the terminal changed hands (12.2).
   * `controller` "supervisor": a person holds it, and this connection's input and resizes are
   * refused until it is handed back.
   */
  controller: [info: { controller: string; uid?: number; since: number; you: boolean }];
  /** Version 5 and later: `count` input, resize or control frames were not carried out (12.3). */
  refused: [info: { code: string; what: string; count: number; message: string }];
  error: [error: Error];
}

export function signalNumber(signal: number | string): number {
  if (typeof signal === "number") return signal;
  const n = (osConstants.signals as Record<string, number>)[signal];
  if (n === undefined) throw new PtyvisorError(`unknown signal ${signal}`);
  return n;
}

export class Session extends EventEmitter<SessionEvents> {
  id = "";
  unit = "";
  pid = 0;
  role: "controller" | "observer" = "controller";
  /** The offset of the next output byte this connection will receive. */
  offset = 0;
  /** ATTACHED's details, for a session attached to (not for one started here). */
  attachedInfo: AttachedInfo | null = null;
  /** Resolves with the EXIT; rejects if the connection failed or detached first. */
  readonly exited: Promise<ExitInfo>;
  /** Resolves once STARTED or ATTACHED has been received. */
  readonly ready: Promise<void>;

  private resolveExit!: (exit: ExitInfo) => void;
  private rejectExit!: (e: Error) => void;
  private resolveReady!: () => void;
  private rejectReady!: (e: Error) => void;
  private readonly iterators = new Set<OutputQueue>();
  private drained: (() => void) | null = null;
  private over = false;

  private conn: Connection | null = null;
  /** Frames written before the connection was made (spawn() returns before it is). */
  private early: Array<(conn: Connection) => void> = [];
  private closed = false;

  /**
   * Takes over a connection that has sent START or ATTACH (or will have: a promise of one),
   * and reads its frames from now on.
   */
  constructor(
    connection: Connection | Promise<Connection>,
    private readonly snapshotter: Snapshotter | null = null,
  ) {
    super();
    this.exited = new Promise((resolve, reject) => {
      this.resolveExit = resolve;
      this.rejectExit = reject;
    });
    this.ready = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    // Observed or not, a rejection here must never crash the process.
    this.exited.catch(() => {});
    this.ready.catch(() => {});
    void this.pump(connection);
  }

  /** Writes input (a string is sent as UTF-8), split into frames of at most 64 KiB. */
  write(data: string | Uint8Array): void {
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    for (let at = 0; at < bytes.length; at += MAX_IO_PAYLOAD) {
      const piece = bytes.subarray(at, at + MAX_IO_PAYLOAD);
      this.withConn((conn) => conn.send(FrameType.INPUT, piece));
    }
  }

  resize(cols: number, rows: number): void {
    this.withConn((conn) => conn.sendJson(FrameType.RESIZE, { rows, cols }));
  }

  /** Sends a signal to the foreground job (like ^C) or to every process of the session. */
  signal(signal: number | string, target: SignalTarget = "foreground"): void {
    const number = signalNumber(signal);
    this.withConn((conn) => conn.sendJson(FrameType.SIGNAL, { signal: number, target }));
  }

  /** Ends the session (EXIT reason "stopped" follows). */
  stop(): void {
    this.withConn((conn) => conn.send(FrameType.STOP));
  }

  /** Leaves the session running; resolves with the offset this connection stopped at. */
  async detach(): Promise<number> {
    const detachedAt = new Promise<number>((resolve, reject) => {
      this.once("detached", (info) => resolve(info.offset));
      this.exited.then(() => reject(new PtyvisorError("the session exited before DETACH was answered")), reject);
    });
    this.withConn((conn) => conn.send(FrameType.DETACH));
    return detachedAt;
  }

  /**
   * What the session's terminal shows now (Client.snapshot, on a connection of its own). It
   * covers the output that had reached the daemon when the request did: at least every byte
   * this connection has received ('data'), since the daemon sent them earlier.
   */
  async snapshot(options: SnapshotOptions = {}): Promise<Screen> {
    if (!this.snapshotter) throw new PtyvisorError("this session was not made by a Client: use client.snapshot(id)");
    await this.ready;
    return this.snapshotter.snapshot(this.id, options);
  }

  /** Closes the connection: a bound session ends, a detached one goes on. */
  close(): void {
    this.closed = true;
    this.conn?.close();
  }

  /** Stops or resumes reading output (node-pty's pause/resume). */
  pauseOutput(paused: boolean): void {
    this.withConn((conn) => (paused ? conn.socket.pause() : conn.socket.resume()));
  }

  private withConn(write: (conn: Connection) => void): void {
    if (this.conn) write(this.conn);
    else this.early.push(write);
  }

  /** The output, chunk by chunk, until the session exits (or detaches). Throws on failure. */
  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    const queue = new OutputQueue(() => this.wakePump());
    this.iterators.add(queue);
    if (this.over) queue.end(null);
    return queue;
  }

  private async pump(connection: Connection | Promise<Connection>): Promise<void> {
    try {
      this.conn = await connection;
      if (this.closed) this.conn.close();
      for (const write of this.early) write(this.conn);
      this.early = [];
      for (;;) {
        if (this.iteratorsFull()) await this.waitForIterators();
        // Frames already received are handled in this turn, one after the other; only an
        // empty queue costs an await (a promise per frame was the pump's main cost).
        const frame = this.conn.takeFrame() ?? (await this.conn.nextFrame());
        if (!frame) throw new ConnectionLostError("the daemon closed the connection before the session's end");
        if (this.handle(frame.type, frame.payload)) return;
        if (frame.type === FrameType.STARTED || frame.type === FrameType.ATTACHED) {
          // The caller of open()/attach() resumes in this turn: let it add its listeners and
          // iterators before the first output is emitted.
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
    } catch (e) {
      this.fail(e as Error);
    } finally {
      this.conn?.close();
    }
  }

  /** Handles one frame; returns true when it was the connection's last. */
  private handle(type: number, payload: Buffer): boolean {
    switch (type) {
      case FrameType.STARTED: {
        const info = started(parseJsonObject({ type, payload }));
        Object.assign(this, info);
        this.resolveReady();
        this.emit("started", info);
        return false;
      }
      case FrameType.ATTACHED: {
        const info = attached(parseJsonObject({ type, payload }));
        this.attachedInfo = info;
        this.id = info.id;
        this.unit = info.unit;
        this.pid = info.pid;
        this.role = info.role;
        this.offset = info.offset;
        this.resolveReady();
        this.emit("started", info);
        return false;
      }
      case FrameType.OUTPUT:
        this.offset += payload.length;
        for (const q of this.iterators) q.push(payload);
        this.emit("data", payload);
        return false;
      case FrameType.DROPPED: {
        const body = parseJsonObject({ type, payload });
        const info = { offset: int(body, "offset", "DROPPED"), lost: int(body, "lost", "DROPPED") };
        this.offset = info.offset;
        this.emit("dropped", info);
        return false;
      }
      case FrameType.EXIT: {
        const exit = exitInfo(parseJsonObject({ type, payload }));
        this.over = true;
        this.resolveReady();
        for (const q of this.iterators) q.end(null);
        this.resolveExit(exit);
        this.emit("exit", exit);
        return true;
      }
      case FrameType.DETACHED: {
        const body = parseJsonObject({ type, payload });
        const info = { offset: int(body, "offset", "DETACHED"), reason: str(body, "reason", "DETACHED") };
        this.over = true;
        for (const q of this.iterators) q.end(null);
        this.rejectExit(new PtyvisorError(`detached (${info.reason}) at offset ${info.offset}`));
        this.emit("detached", info);
        return true;
      }
      // The frame decoder admits these only in a connection of version 5 or later (section 8).
      case FrameType.CONTROLLER: {
        const body = parseJsonObject({ type, payload });
        const info: SessionEvents["controller"][0] = {
          controller: str(body, "controller", "CONTROLLER"),
          since: int(body, "since", "CONTROLLER"),
          you: body.you === true,
        };
        if (body.uid !== undefined) info.uid = int(body, "uid", "CONTROLLER");
        this.emit("controller", info);
        return false;
      }
      case FrameType.REFUSED: {
        const body = parseJsonObject({ type, payload });
        this.emit("refused", {
          code: str(body, "code", "REFUSED"),
          what: str(body, "what", "REFUSED"),
          count: int(body, "count", "REFUSED"),
          message: typeof body.message === "string" ? body.message : "",
        });
        return false;
      }
      case FrameType.ERROR:
        throw serverError({ type, payload });
      default:
        throw new ProtocolError(`unexpected frame type ${type} in a session`);
    }
  }

  private fail(error: Error): void {
    if (this.over) return;
    this.over = true;
    for (const q of this.iterators) q.end(error);
    this.rejectReady(error);
    this.rejectExit(error);
    if (this.listenerCount("error") > 0) this.emit("error", error);
  }

  /** Whether an async iterator holds as many chunks as it may (then the pump waits). */
  private iteratorsFull(): boolean {
    if (this.iterators.size === 0) return false;
    for (const q of this.iterators) if (q.size >= ITERATOR_HIGH_WATER) return true;
    return false;
  }

  private waitForIterators(): Promise<void> {
    return new Promise((resolve) => {
      this.drained = () => {
        if (!this.iteratorsFull()) {
          this.drained = null;
          resolve();
        }
      };
    });
  }

  private wakePump(): void {
    this.drained?.();
  }
}

class OutputQueue implements AsyncIterator<Buffer> {
  private readonly chunks: Buffer[] = [];
  private done = false;
  private error: Error | null = null;
  private waiter: (() => void) | null = null;

  constructor(private readonly onTake: () => void) {}

  get size(): number {
    return this.chunks.length;
  }

  push(chunk: Buffer): void {
    if (this.done) return; // returned early: the consumer wants no more
    this.chunks.push(chunk);
    this.wake();
  }

  end(error: Error | null): void {
    this.done = true;
    this.error = error;
    this.wake();
  }

  async next(): Promise<IteratorResult<Buffer>> {
    for (;;) {
      const chunk = this.chunks.shift();
      if (chunk) {
        this.onTake();
        return { value: chunk, done: false };
      }
      if (this.error) throw this.error;
      if (this.done) return { value: undefined, done: true };
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }

  async return(): Promise<IteratorResult<Buffer>> {
    this.done = true;
    this.chunks.length = 0;
    this.onTake();
    return { value: undefined, done: true };
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}
