// One connection to the daemon: one exchange (docs/protocol.md, section 1). Frames are read
// through nextFrame(); when the reader falls behind, the socket is paused, so the daemon (and
// for a bound session, the program) waits instead of this process buffering without bound.
import net from "node:net";
import { ConnectError, ConnectionLostError, ProtocolError, PtyvisorError, ServerError } from "./errors.js";
import { encodeFrame, type Frame, FrameDecoder, FrameType, parseJsonObject, PROTOCOL_VERSION } from "./frame.js";

export const DEFAULT_SOCKET = "/run/ptyvisor/ptyvisor.sock";

/** The socket path: the option, else PTYVISOR_SOCKET, else the daemon's default. */
export function resolveSocketPath(explicit?: string): string {
  return explicit ?? process.env.PTYVISOR_SOCKET ?? DEFAULT_SOCKET;
}

/** Frames queued before the socket is paused (each at most 64 KiB of output). */
const HIGH_WATER_FRAMES = 64;

export class Connection {
  private readonly decoder: FrameDecoder;
  private readonly queue: Frame[] = [];
  private waiter: ((ok: boolean) => void) | null = null;
  private failure: Error | null = null;
  private ended = false;
  private paused = false;

  /** `version`: the one every frame sent here carries, which the first frame negotiates (section 8). */
  private constructor(
    readonly socket: net.Socket,
    readonly version: number,
  ) {
    this.decoder = new FrameDecoder(version);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("end", () => this.finish(null));
    socket.on("close", () => this.finish(null));
    socket.on("error", (e: Error) => this.finish(e));
  }

  /** Connects; rejects with ConnectError, or the signal's reason when aborted. */
  static open(socketPath: string, signal?: AbortSignal, version: number = PROTOCOL_VERSION): Promise<Connection> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const socket = net.connect(socketPath);
      const onAbort = () => {
        socket.destroy();
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      socket.once("connect", () => {
        signal?.removeEventListener("abort", onAbort);
        socket.removeAllListeners("error");
        resolve(new Connection(socket, version));
      });
      socket.once("error", (e: NodeJS.ErrnoException) => {
        signal?.removeEventListener("abort", onAbort);
        reject(new ConnectError(`cannot connect to ${socketPath}: ${e.message}`, e.code ?? "EIO"));
      });
    });
  }

  /** The socket's descriptor, for sending START with SCM_RIGHTS (node and Bun expose it). */
  get fd(): number {
    const handle = (this.socket as unknown as { _handle?: { fd?: number } })._handle;
    const fd = handle?.fd;
    if (typeof fd !== "number" || fd < 0) throw new PtyvisorError("this runtime does not expose the socket's descriptor");
    return fd;
  }

  send(type: number, payload?: Uint8Array): boolean {
    if (this.socket.destroyed) return false;
    return this.socket.write(encodeFrame(type, payload, this.version));
  }

  sendJson(type: number, body: object): boolean {
    return this.send(type, Buffer.from(JSON.stringify(body), "utf8"));
  }

  /** Writes raw bytes (the rest of a START the native sender could not send at once). */
  writeRaw(bytes: Uint8Array): void {
    if (!this.socket.destroyed) this.socket.write(bytes);
  }

  /** The next frame, or null at end-of-stream. Throws on a protocol violation or socket error. */
  async nextFrame(signal?: AbortSignal): Promise<Frame | null> {
    for (;;) {
      const frame = this.takeFrame();
      if (frame) return frame;
      if (this.failure) throw this.failure;
      if (this.ended) return null;
      await this.waitForFrame(signal);
    }
  }

  /**
   * A frame already received, or undefined (then nextFrame() waits for one). Synchronous: a
   * reader that drains the queue with it pays no promise and no microtask turn per frame,
   * which is most of the client's own cost per OUTPUT frame at full throughput.
   */
  takeFrame(): Frame | undefined {
    const frame = this.queue.shift();
    if (frame) this.resumeIfDrained();
    return frame;
  }

  /** Reads the single reply frame of a request; an ERROR becomes ServerError. */
  async reply(expected: number, what: string, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const frame = await this.nextFrame(signal);
    if (!frame) throw new ConnectionLostError(`${what}: the daemon closed the connection without a reply`);
    return expectJson(frame, expected, what);
  }

  close(): void {
    this.socket.destroy();
  }

  private waitForFrame(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        this.close();
        return reject(signal.reason);
      }
      const onAbort = () => {
        this.waiter = null;
        this.close();
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiter = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
    });
  }

  private onData(chunk: Buffer): void {
    try {
      for (const frame of this.decoder.push(chunk)) this.queue.push(frame);
    } catch (e) {
      // Framing is lost: nothing after a bad header can be interpreted (section 2.2).
      this.failure = e as Error;
      this.socket.destroy();
    }
    if (this.queue.length >= HIGH_WATER_FRAMES && !this.paused) {
      this.paused = true;
      this.socket.pause();
    }
    this.wake();
  }

  private resumeIfDrained(): void {
    if (this.paused && this.queue.length < HIGH_WATER_FRAMES / 2) {
      this.paused = false;
      this.socket.resume();
    }
  }

  private finish(error: Error | null): void {
    // ECONNRESET after the server's last frame is an ordinary close; frames queued still count.
    if (error && !this.failure && (error as NodeJS.ErrnoException).code !== "ECONNRESET" && (error as NodeJS.ErrnoException).code !== "EPIPE") {
      this.failure = error;
    }
    this.ended = true;
    this.wake();
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.(true);
  }
}

/** Checks that a frame is the expected JSON reply; turns ERROR into ServerError. */
export function expectJson(frame: Frame, expected: number, what: string): Record<string, unknown> {
  if (frame.type === FrameType.ERROR) throw serverError(frame);
  if (frame.type !== expected) throw new ProtocolError(`${what}: expected frame type ${expected}, got ${frame.type}`);
  return parseJsonObject(frame);
}

export function serverError(frame: Frame): ServerError {
  const body = parseJsonObject(frame);
  if (typeof body.code !== "string" || typeof body.message !== "string") {
    throw new ProtocolError("ERROR without a string code and message");
  }
  return new ServerError(body.code, body.message);
}
