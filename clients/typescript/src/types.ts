// The shapes of the daemon's replies (docs/protocol.md, 5.5 and section 9), as this client
// returns them.

/** A position in a session's output log: its start, its end (new output only), or an offset. */
export type Position = "start" | "tail" | number;

/** EXIT (5.5): how the session ended. */
export interface ExitInfo {
  status: "exited" | "signaled" | "unknown";
  /** The exit code, when status is "exited". */
  code?: number;
  /** The terminating signal, when status is "signaled". */
  signal?: number;
  coreDumped?: boolean;
  unitResult: string;
  reason: string;
}

export type SessionState = "starting" | "running" | "exited";

export interface StartedInfo {
  id: string;
  unit: string;
  pid: number;
}

export interface AttachedInfo extends StartedInfo {
  role: "controller" | "observer";
  /** The log's start and end when attached, and the offset where the output that follows begins. */
  start: number;
  end: number;
  offset: number;
  state: SessionState;
  size: { cols: number; rows: number };
}

export interface SessionInfo {
  id: string;
  unit: string;
  argv: string[];
  cwd: string;
  state: SessionState;
  exit: ExitInfo | null;
  pid: number;
  /** The log's start. */
  start: number;
  /** The log's end: bytes written so far. */
  offset: number;
  clients: number;
  created: number;
  detached: boolean;
}

export interface ReadResult {
  id: string;
  start: number;
  /** Where `data` begins; above the requested offset when bytes were dropped. */
  offset: number;
  end: number;
  state: SessionState;
  exit: ExitInfo | null;
  data: Buffer;
  /** offset + data.length < end: there is more to read. */
  more: boolean;
}

export interface WaitResult {
  matched: boolean;
  reason: "exit" | "quiet" | "text" | "timeout" | "exited" | "gone";
  state: SessionState;
  exit: ExitInfo | null;
  /** The log's end when the wait ended. */
  offset: number;
  matchStart?: number;
  matchEnd?: number;
}

export interface KilledResult {
  id: string;
  state: SessionState;
  exit: ExitInfo | null;
}

/** A shell's one-number status: the code, 128 + signal, or 255 when unknown. */
export function shellStatus(exit: ExitInfo): number {
  if (exit.status === "exited") return exit.code ?? 255;
  if (exit.status === "signaled") return 128 + (exit.signal ?? 0);
  return 255;
}
