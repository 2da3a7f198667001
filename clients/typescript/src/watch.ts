// A WATCH (docs/protocol.md, 11.6): a session's events as they happen, on a connection of its
// own, until the session's exit (the last event) or close(). Events reach the listeners
// ('command_end', ...) and the async iterator. Invariant: until the first listener of an
// event is added, every event waits in the watch for an iterator, so a `for await` begun after
// other awaits misses none; a watch with listeners keeps none for an iterator that never comes.
import { EventEmitter } from "node:events";
import { ConnectionLostError, ProtocolError, UnsupportedVersionError } from "./errors.js";
import { type Connection, serverError } from "./connection.js";
import { COMMANDS_PROTOCOL_VERSION, encodeJsonFrame, FrameType, parseJsonObject } from "./frame.js";
import { sessionEvent } from "./parse.js";
import type { SessionEvent, SessionEventName } from "./types.js";

type EventOf<N extends SessionEventName> = Extract<SessionEvent, { event: N }>;

export type WatchEvents = { [N in SessionEventName]: [event: EventOf<N>] } & {
  /** Every event, whatever its name. */
  event: [event: SessionEvent];
  /** The watch failed (connection lost, ERROR such as no_such_session, or busy: events not read in time). */
  error: [error: Error];
  /** The watch is over: after 'exit', close(), or a failure. */
  close: [];
};

const EVENT_NAMES: ReadonlySet<string> = new Set(["command_start", "command_end", "prompt", "input", "exit", "event"]);

export class Watch extends EventEmitter<WatchEvents> implements AsyncIterable<SessionEvent> {
  /**
   * Resolves once the WATCH request is written to the socket. The daemon sends no
   * acknowledgement (11.6): events that happen before it has read the request are not sent.
   */
  readonly ready: Promise<void>;
  /** Resolves when the watch is over; rejects with its failure. */
  readonly done: Promise<void>;

  private readonly queue: SessionEvent[] = [];
  private buffering = true;
  private over = false;
  private failure: Error | null = null;
  private closed = false;
  private conn: Connection | null = null;
  private waiter: (() => void) | null = null;
  private resolveDone!: () => void;
  private rejectDone!: (e: Error) => void;

  /** Takes a connection being opened in version 4 and sends WATCH on it once it is open. */
  constructor(
    connection: Promise<Connection>,
    readonly id: string,
  ) {
    super();
    this.done = new Promise((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    this.done.catch(() => {});
    this.on("newListener", (name) => {
      if (EVENT_NAMES.has(name as string)) this.buffering = false;
    });
    const opened = connection.then((conn) => {
      this.conn = conn;
      if (this.closed) {
        conn.close();
        return conn;
      }
      return new Promise<Connection>((resolve) => {
        conn.socket.write(encodeJsonFrame(FrameType.WATCH, { id }, conn.version), () => resolve(conn));
      });
    });
    this.ready = opened.then(() => undefined);
    this.ready.catch(() => {});
    void this.pump(opened);
  }

  /** Ends the watch: closes its connection (the daemon drops the subscription). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.conn?.close();
    this.finish(null);
  }

  [Symbol.asyncIterator](): AsyncIterator<SessionEvent> {
    this.buffering = true;
    return {
      next: async () => {
        for (;;) {
          const event = this.queue.shift();
          if (event) return { value: event, done: false };
          if (this.failure) throw this.failure;
          if (this.over) return { value: undefined, done: true };
          await new Promise<void>((resolve) => (this.waiter = resolve));
        }
      },
      // A `break` out of `for await` ends the watch.
      return: async () => {
        this.close();
        return { value: undefined, done: true };
      },
    };
  }

  private async pump(opened: Promise<Connection>): Promise<void> {
    let conn: Connection;
    try {
      conn = await opened;
    } catch (e) {
      return this.finish(e as Error);
    }
    try {
      for (;;) {
        if (this.closed) return;
        const frame = conn.takeFrame() ?? (await conn.nextFrame());
        if (this.closed) return;
        if (!frame) throw new ConnectionLostError("WATCH: the daemon closed the connection before the session's exit");
        if (frame.type === FrameType.ERROR) {
          const error = serverError(frame);
          // A daemon older than version 4 refuses our first frame's version (section 8).
          if (error.code === "unsupported_version") {
            throw new UnsupportedVersionError("session events (WATCH)", COMMANDS_PROTOCOL_VERSION, error.serverMessage);
          }
          throw error;
        }
        if (frame.type !== FrameType.EVENT) throw new ProtocolError(`WATCH: unexpected frame type ${frame.type}`);
        const event = sessionEvent(parseJsonObject(frame));
        this.deliver(event);
        if (event.event === "exit") return this.finish(null);
      }
    } catch (e) {
      this.finish(e as Error);
    } finally {
      conn.close();
    }
  }

  private deliver(event: SessionEvent): void {
    if (this.buffering) this.queue.push(event);
    this.wake();
    // A listener's exception must not end the pump: it is the listener's, not the watch's.
    try {
      const emit = this.emit.bind(this) as (name: string, event: SessionEvent) => boolean;
      emit(event.event, event);
      emit("event", event);
    } catch (e) {
      queueMicrotask(() => {
        throw e;
      });
    }
  }

  private finish(error: Error | null): void {
    if (this.over) return;
    this.over = true;
    this.failure = error;
    this.wake();
    if (error) {
      this.rejectDone(error);
      if (this.listenerCount("error") > 0) this.emit("error", error);
    } else {
      this.resolveDone();
    }
    this.emit("close");
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}
