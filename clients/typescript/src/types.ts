// The shapes of the daemon's replies (docs/protocol.md, 5.5 and sections 9 to 11), as this
// client returns them.

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
  /** "bash" or "zsh" when started with shell integration (11.5), else null. */
  shell: ShellName | null;
  /** The shell shows its prompt and runs no command (11.2). */
  atPrompt: boolean;
  /** A program of the session waits for input on the terminal, its shell's prompt included (11.5). */
  waitingForInput: boolean;
  /** When waitingForInput: Unix ms of the last output or input before the wait was seen; else null. */
  waitingSince: number | null;
  /** The running command's record, else the newest ended one, else null. */
  lastCommand: CommandRecord | null;
  /** The session's sandbox profile (13.3), or null: none. */
  profile: string | null;
  /** What the session has cost (13.3), or null when the daemon knows no figure of it. */
  usage: SessionUsage | null;
}

/**
 * LIST's `usage` (13.3), from the session's cgroup. Each figure is present only where the
 * host counts it. A running session's figures are at most a second old.
 */
export interface SessionUsage {
  /** User and system CPU time, microseconds. */
  cpuUsec?: number;
  /** Bytes. */
  memoryCurrent?: number;
  memoryPeak?: number;
  tasksCurrent?: number;
  tasksPeak?: number;
  /** Processes the OOM killer ended. */
  oomKills?: number;
  /** Forks refused at the profile's tasks_max. */
  tasksLimitHits?: number;
  ioReadBytes?: number;
  ioWriteBytes?: number;
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
  reason: "exit" | "quiet" | "text" | "command" | "prompt" | "input" | "timeout" | "exited" | "gone";
  state: SessionState;
  exit: ExitInfo | null;
  /** The log's end when the wait ended. */
  offset: number;
  matchStart?: number;
  matchEnd?: number;
  /** For `for: "command"` (reason "command"): the record of the command that ended. */
  command?: CommandRecord;
}

export interface KilledResult {
  id: string;
  state: SessionState;
  exit: ExitInfo | null;
}

export type ShellName = "bash" | "zsh";

/**
 * A command the session's shell ran (11.2). Its output is the log's bytes
 * [outputStart, outputEnd); outputEnd, exitCode and endedMs are null while it runs (exitCode
 * also when the shell reported no status).
 */
export interface CommandRecord {
  /** Counts the session's commands from 1. */
  seq: number;
  /** The command line as the shell reported it ("" when none). */
  command: string;
  /** The working directory it ran in ("" when the shell reported none). */
  cwd: string;
  outputStart: number;
  outputEnd: number | null;
  exitCode: number | null;
  /** Unix milliseconds when the daemon learned that it started, and ended. */
  startedMs: number;
  endedMs: number | null;
}

/** COMMAND_LIST (11.3): the session's command records. */
export interface CommandList {
  id: string;
  shell: ShellName | null;
  atPrompt: boolean;
  waitingForInput: boolean;
  /** The command running now, or null. */
  current: CommandRecord | null;
  /** The ended records with a seq above the request's `since`, oldest first. */
  commands: CommandRecord[];
  /** The seq of the oldest record the daemon keeps (0: none): records below it were dropped. */
  firstSeq: number;
}

export type ExecState = "exited" | "waiting_for_input" | "timeout" | "interrupted" | "session_ended";

/** What exec() returns: EXECUTED (11.4) and the command's output, read from the log. */
export interface ExecResult {
  id: string;
  /** "exited": the command ended; "waiting_for_input" and "timeout": it still runs (answer with send(), then wait for "command" after seq - 1). */
  state: ExecState;
  /** The status for "exited" and "interrupted", else null. */
  exitCode: number | null;
  /** The command's record (running, for "waiting_for_input" and "timeout"), or null if it never started. */
  record: CommandRecord | null;
  /** record.seq, or null. */
  seq: number | null;
  /**
   * The bytes the command wrote through the terminal, as in the log: [outputStart, outputEnd),
   * or up to the log's end at the reply while it still runs. At most maxOutputBytes (its head).
   */
  output: Buffer;
  /** `output` as UTF-8 with "\r\n" turned into "\n" (escape sequences kept). */
  text: string;
  /** Bytes of the output are missing from `output`: past maxOutputBytes, or dropped from the log. */
  truncated: boolean;
  /** The log's end at the reply. */
  offset: number;
  sessionState: SessionState;
}

/** An EVENT of a WATCH (11.6); `offset` is the log's end when it happened. */
export type SessionEvent =
  | { event: "command_start"; offset: number; command: CommandRecord }
  | { event: "command_end"; offset: number; command: CommandRecord }
  | { event: "prompt"; offset: number }
  | { event: "input"; offset: number; sinceMs: number }
  | { event: "exit"; offset: number; exit: ExitInfo };

export type SessionEventName = SessionEvent["event"];

/** A shell's one-number status: the code, 128 + signal, or 255 when unknown. */
export function shellStatus(exit: ExitInfo): number {
  if (exit.status === "exited") return exit.code ?? 255;
  if (exit.status === "signaled") return 128 + (exit.signal ?? 0);
  return 255;
}
