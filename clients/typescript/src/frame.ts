// Frames (docs/protocol.md, section 2): an 8-byte header `P` `V` version type length(be32),
// then the payload. The decoder validates each header in the order of section 2.2 before it
// buffers any payload, so a hostile length never makes it allocate more than the type's bound.
import { ProtocolError } from "./errors.js";
import { BOUNDS, FrameType, HEADER_SIZE, LAST_TYPE_OF_VERSION, NEWEST_VERSION, OLDEST_VERSION, REQUIRED_MEMBERS } from "./wire.js";

/** The version of every connection but SNAPSHOT's (section 9). */
export const PROTOCOL_VERSION = 2;
/** The version a SNAPSHOT connection negotiates (section 10): its first frame carries it. */
export const SCREEN_PROTOCOL_VERSION = 3;
/** The version of the command-aware requests (section 11): COMMANDS, EXEC, WATCH, WAIT for a command, a prompt or input. */
export const COMMANDS_PROTOCOL_VERSION = 4;
/** The version of a START that names a sandbox profile (section 13): an older one's `profile` is ignored. */
export const PROFILES_PROTOCOL_VERSION = 6;

export { FrameType } from "./wire.js";

export type FrameTypeNumber = (typeof FrameType)[keyof typeof FrameType];

const OUTPUT = FrameType.OUTPUT;

/** The largest INPUT payload; longer input is split over several frames. */
export const MAX_IO_PAYLOAD = BOUNDS[FrameType.INPUT][1];
export { HEADER_SIZE };

/**
 * A frame or payload the protocol refuses. `wireError` is the ERROR code a daemon would answer
 * it with (bad_frame, unsupported_version, too_big), in the order of section 2.2.
 */
export class FrameError extends ProtocolError {
  constructor(
    readonly wireError: string,
    message: string,
  ) {
    super(message);
  }
}

export interface Frame {
  type: number;
  payload: Buffer;
}

export function encodeFrame(type: number, payload: Uint8Array = new Uint8Array(0), version: number = PROTOCOL_VERSION): Buffer {
  const frame = Buffer.allocUnsafe(HEADER_SIZE + payload.length);
  frame[0] = 0x50;
  frame[1] = 0x56;
  frame[2] = version;
  frame[3] = type;
  frame.writeUInt32BE(payload.length, 4);
  frame.set(payload, HEADER_SIZE);
  return frame;
}

export function encodeJsonFrame(type: number, body: object, version: number = PROTOCOL_VERSION): Buffer {
  return encodeFrame(type, Buffer.from(JSON.stringify(body), "utf8"), version);
}

/**
 * Reassembles frames from a byte stream that may split or join them anywhere. OUTPUT is
 * streamed: its payload comes out in the pieces the reads brought, without copying (its frame
 * boundaries carry no meaning, section 2.1), so a 64 KiB frame across two reads costs no copy.
 * Every other frame comes out whole.
 *
 * `version` is the connection's (the version its first frame carried): frames of that version
 * or an older one are accepted (the server writes version 1 before it has read ours, section 8),
 * each with the frame types of its own version.
 */
export class FrameDecoder {
  constructor(private readonly version: number = PROTOCOL_VERSION) {}

  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Payload bytes still to come of the OUTPUT frame being streamed. */
  private outputLeft = 0;

  /** Adds bytes; returns the frames (and OUTPUT pieces) now complete. Throws ProtocolError on a bad header. */
  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.outputLeft > 0) {
        if (this.buffered === 0) break;
        const piece = this.takeUpTo(this.outputLeft);
        this.outputLeft -= piece.length;
        frames.push({ type: OUTPUT, payload: piece });
        continue;
      }
      if (this.buffered < HEADER_SIZE) break;
      const head = this.peek(HEADER_SIZE);
      const length = validateHeader(head, this.version);
      if (head[3] === OUTPUT) {
        this.take(HEADER_SIZE);
        this.outputLeft = length;
        continue;
      }
      if (this.buffered < HEADER_SIZE + length) break;
      const whole = this.take(HEADER_SIZE + length);
      frames.push({ type: whole[3], payload: whole.subarray(HEADER_SIZE) });
    }
    return frames;
  }

  /** At most n bytes from the first read held, without copying. */
  private takeUpTo(n: number): Buffer {
    const first = this.chunks[0];
    if (first.length <= n) {
      this.chunks.shift();
      this.buffered -= first.length;
      return first;
    }
    this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return first.subarray(0, n);
  }

  private peek(n: number): Buffer {
    if (this.chunks[0].length >= n) return this.chunks[0].subarray(0, n);
    return this.copyOut(n, false);
  }

  private take(n: number): Buffer {
    const first = this.chunks[0];
    this.buffered -= n;
    if (first.length >= n) {
      // The common case: the frame lies in one read; no copy.
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    return this.copyOut(n, true);
  }

  /** Copies exactly n bytes that straddle reads (never the whole backlog); consumes them if asked. */
  private copyOut(n: number, consume: boolean): Buffer {
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    let index = 0;
    for (; filled < n; index++) {
      const chunk = this.chunks[index];
      const used = Math.min(chunk.length, n - filled);
      chunk.copy(out, filled, 0, used);
      filled += used;
      if (consume && used < chunk.length) {
        this.chunks[index] = chunk.subarray(used);
        break;
      }
    }
    // One splice, not a shift per chunk: many tiny reads must not cost quadratic time.
    if (consume) this.chunks.splice(0, index); // the chunks before `index` were used up
    return out;
  }
}

/** Section 2.2, in its order. Returns the payload length. */
function validateHeader(head: Buffer, connectionVersion: number): number {
  if (head[0] !== 0x50 || head[1] !== 0x56) throw new FrameError("bad_frame", "bad frame: magic is not PV");
  const version = head[2];
  if (version < OLDEST_VERSION || version > Math.min(connectionVersion, NEWEST_VERSION)) {
    throw new FrameError("unsupported_version", `unsupported frame version ${version}`);
  }
  const type = head[3];
  if (type < 1 || type > LAST_TYPE_OF_VERSION[version]) {
    throw new FrameError("bad_frame", `bad frame: unknown type ${type} in version ${version}`);
  }
  const length = head.readUInt32BE(4);
  const [min, max] = BOUNDS[type];
  if (length > max) throw new FrameError("too_big", `frame type ${type} too big: ${length} > ${max}`);
  if (length < min) throw new FrameError("bad_frame", `bad frame: type ${type} length ${length} < ${min}`);
  return length;
}

const TYPE_NAMES: ReadonlyMap<number, string> = new Map(Object.entries(FrameType).map(([name, n]) => [n, name]));
const utf8 = new TextDecoder("utf-8", { fatal: true });

function jsonTypeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value; // string, boolean, object
}

/**
 * Parses a JSON payload that must be one object (section 3), in UTF-8, with the members its
 * type requires, each of its JSON type (protocol/protocol.json). Else FrameError bad_frame.
 */
export function parseJsonObject(frame: Frame): Record<string, unknown> {
  const name = TYPE_NAMES.get(frame.type) ?? `type ${frame.type}`;
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(frame.payload));
  } catch (e) {
    throw new FrameError("bad_frame", `${name}: payload is not JSON (${(e as Error).message})`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new FrameError("bad_frame", `${name}: payload is not a JSON object`);
  }
  const body = value as Record<string, unknown>;
  for (const [member, kinds] of Object.entries(REQUIRED_MEMBERS[name] ?? {})) {
    if (!(member in body)) throw new FrameError("bad_frame", `${name} without "${member}"`);
    if (!kinds.includes(jsonTypeOf(body[member]))) {
      throw new FrameError("bad_frame", `${name}: "${member}" is not ${kinds.join(" or ")}`);
    }
  }
  return body;
}
