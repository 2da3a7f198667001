// Turns the daemon's JSON replies into typed values. Every member is checked: a reply that
// breaks the protocol is a ProtocolError, never a value of the wrong type passed on.
import { ProtocolError } from "./errors.js";
import type {
  AttachedInfo,
  CommandList,
  CommandRecord,
  ExecState,
  ExitInfo,
  KilledResult,
  SessionEvent,
  SessionInfo,
  SessionState,
  SessionUsage,
  ShellName,
  StartedInfo,
  WaitResult,
} from "./types.js";

type Json = Record<string, unknown>;

function fail(what: string, member: string): never {
  throw new ProtocolError(`${what}: member "${member}" is missing or of the wrong type`);
}

export function int(body: Json, member: string, what: string): number {
  const v = body[member];
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0) fail(what, member);
  return v;
}

export function str(body: Json, member: string, what: string): string {
  const v = body[member];
  if (typeof v !== "string") fail(what, member);
  return v;
}

function optInt(body: Json, member: string, what: string): number | undefined {
  return body[member] === undefined ? undefined : int(body, member, what);
}

function intOrNull(body: Json, member: string, what: string): number | null {
  return body[member] === null ? null : int(body, member, what);
}

function bool(body: Json, member: string, what: string): boolean {
  const v = body[member];
  if (typeof v !== "boolean") fail(what, member);
  return v;
}

const STATES = ["starting", "running", "exited"];

function state(body: Json, what: string): SessionState {
  const v = str(body, "state", what);
  if (!STATES.includes(v)) throw new ProtocolError(`${what}: unknown state "${v}"`);
  return v as SessionState;
}

export function exitInfo(body: Json, what = "EXIT"): ExitInfo {
  const status = str(body, "status", what);
  if (status !== "exited" && status !== "signaled" && status !== "unknown") {
    throw new ProtocolError(`${what}: unknown status "${status}"`);
  }
  const exit: ExitInfo = {
    status,
    unitResult: typeof body.unit_result === "string" ? body.unit_result : "",
    reason: str(body, "reason", what),
  };
  if (status === "exited") exit.code = int(body, "code", what);
  if (status === "signaled") {
    exit.signal = int(body, "signal", what);
    exit.coreDumped = body.core_dumped === true;
  }
  return exit;
}

function exitOrNull(body: Json, what: string): ExitInfo | null {
  const v = body.exit;
  if (v === null || v === undefined) return null;
  if (typeof v !== "object" || Array.isArray(v)) fail(what, "exit");
  return exitInfo(v as Json, `${what}.exit`);
}

export function started(body: Json): StartedInfo {
  const unit = str(body, "unit", "STARTED");
  const id = typeof body.id === "string" ? body.id : (/([0-9a-f]{32})\.service$/.exec(unit)?.[1] ?? "");
  return { id, unit, pid: int(body, "pid", "STARTED") };
}

export function attached(body: Json): AttachedInfo {
  const what = "ATTACHED";
  const size = body.size as Json | undefined;
  if (!size || typeof size !== "object") fail(what, "size");
  const role = str(body, "role", what);
  if (role !== "controller" && role !== "observer") throw new ProtocolError(`${what}: unknown role "${role}"`);
  return {
    id: str(body, "id", what),
    unit: str(body, "unit", what),
    pid: int(body, "pid", what),
    role,
    start: int(body, "start", what),
    end: int(body, "end", what),
    offset: int(body, "offset", what),
    state: state(body, what),
    size: { cols: int(size, "cols", what), rows: int(size, "rows", what) },
  };
}

export function sessionInfo(body: Json): SessionInfo {
  const what = "SESSIONS";
  const argv = body.argv;
  if (!Array.isArray(argv) || !argv.every((a) => typeof a === "string")) fail(what, "argv");
  return {
    id: str(body, "id", what),
    unit: str(body, "unit", what),
    argv: argv as string[],
    cwd: typeof body.cwd === "string" ? body.cwd : "",
    state: state(body, what),
    exit: exitOrNull(body, what),
    pid: int(body, "pid", what),
    start: int(body, "start", what),
    offset: int(body, "offset", what),
    clients: int(body, "clients", what),
    created: int(body, "created", what),
    detached: body.detached === true,
    // 11.5: each of these is present only when it is not null or false.
    shell: body.shell === undefined ? null : shellName(body, what),
    atPrompt: body.at_prompt === undefined ? false : bool(body, "at_prompt", what),
    waitingForInput: body.waiting_for_input === undefined ? false : bool(body, "waiting_for_input", what),
    waitingSince: body.waiting_since === undefined ? null : intOrNull(body, "waiting_since", what),
    lastCommand: recordOrNull(body, "last_command", what),
    // 13.3: each present only when known.
    profile: body.profile === undefined ? null : str(body, "profile", what),
    usage: usageOrNull(body, what),
  };
}

/** The members of `usage` (13.3) and their names here; others are a later version's, left out. */
const USAGE_MEMBERS: [string, keyof SessionUsage][] = [
  ["cpu_usec", "cpuUsec"],
  ["memory_current", "memoryCurrent"],
  ["memory_peak", "memoryPeak"],
  ["tasks_current", "tasksCurrent"],
  ["tasks_peak", "tasksPeak"],
  ["oom_kills", "oomKills"],
  ["tasks_limit_hits", "tasksLimitHits"],
  ["io_read_bytes", "ioReadBytes"],
  ["io_write_bytes", "ioWriteBytes"],
];

function usageOrNull(body: Json, what: string): SessionUsage | null {
  const v = body.usage;
  if (v === undefined || v === null) return null;
  if (typeof v !== "object" || Array.isArray(v)) fail(what, "usage");
  const usage: SessionUsage = {};
  // int() refuses negatives and fractions; a figure past 2^53 loses precision in a JS number
  // (as every integer of this client does) but stays a number.
  for (const [wire, name] of USAGE_MEMBERS) {
    const figure = optInt(v as Json, wire, `${what}.usage`);
    if (figure !== undefined) usage[name] = figure;
  }
  return usage;
}

function shellName(body: Json, what: string): ShellName | null {
  const v = body.shell;
  if (v === null) return null;
  if (v !== "bash" && v !== "zsh") throw new ProtocolError(`${what}: unknown shell ${JSON.stringify(v)}`);
  return v;
}

/** A command record (11.2). */
export function commandRecord(body: Json, what: string): CommandRecord {
  const record: CommandRecord = {
    seq: int(body, "seq", what),
    command: str(body, "command", what),
    cwd: str(body, "cwd", what),
    outputStart: int(body, "output_start", what),
    outputEnd: intOrNull(body, "output_end", what),
    exitCode: intOrNull(body, "exit_code", what),
    startedMs: int(body, "started_ms", what),
    endedMs: intOrNull(body, "ended_ms", what),
  };
  if (record.outputEnd !== null && record.outputEnd < record.outputStart) {
    throw new ProtocolError(`${what}: output_end ${record.outputEnd} before output_start ${record.outputStart}`);
  }
  return record;
}

function recordOrNull(body: Json, member: string, what: string): CommandRecord | null {
  const v = body[member];
  if (v === null || v === undefined) return null;
  if (typeof v !== "object" || Array.isArray(v)) fail(what, member);
  return commandRecord(v as Json, `${what}.${member}`);
}

export function commandList(body: Json): CommandList {
  const what = "COMMAND_LIST";
  const commands = body.commands;
  if (!Array.isArray(commands)) fail(what, "commands");
  return {
    id: str(body, "id", what),
    shell: shellName(body, what),
    atPrompt: bool(body, "at_prompt", what),
    waitingForInput: bool(body, "waiting_for_input", what),
    current: recordOrNull(body, "current", what),
    commands: commands.map((c, i) => {
      if (typeof c !== "object" || c === null || Array.isArray(c)) fail(what, `commands[${i}]`);
      return commandRecord(c as Json, `${what}.commands[${i}]`);
    }),
    firstSeq: int(body, "first_seq", what),
  };
}

const EXEC_STATES = ["exited", "waiting_for_input", "timeout", "interrupted", "session_ended"];

/** EXECUTED (11.4), without the output (exec() reads it). */
export function executed(body: Json) {
  const what = "EXECUTED";
  const execState = str(body, "state", what);
  if (!EXEC_STATES.includes(execState)) throw new ProtocolError(`${what}: unknown state "${execState}"`);
  const sessionState = str(body, "session_state", what);
  if (!STATES.includes(sessionState)) throw new ProtocolError(`${what}: unknown session_state "${sessionState}"`);
  return {
    id: str(body, "id", what),
    state: execState as ExecState,
    exitCode: intOrNull(body, "exit_code", what),
    record: recordOrNull(body, "command", what),
    offset: int(body, "offset", what),
    sessionState: sessionState as SessionState,
  };
}

/** EVENT (11.6). */
export function sessionEvent(body: Json): SessionEvent {
  const what = "EVENT";
  const event = str(body, "event", what);
  const offset = int(body, "offset", what);
  switch (event) {
    case "command_start":
    case "command_end": {
      const command = recordOrNull(body, "command", what);
      if (!command) fail(what, "command");
      return { event, offset, command };
    }
    case "prompt":
      return { event, offset };
    case "input":
      return { event, offset, sinceMs: int(body, "since_ms", what) };
    case "exit": {
      const exit = exitOrNull(body, what);
      if (!exit) fail(what, "exit");
      return { event, offset, exit };
    }
    default:
      throw new ProtocolError(`${what}: unknown event "${event}"`);
  }
}

export function waited(body: Json): WaitResult {
  const what = "WAITED";
  const reason = str(body, "reason", what);
  if (!["exit", "quiet", "text", "command", "prompt", "input", "timeout", "exited", "gone"].includes(reason)) {
    throw new ProtocolError(`${what}: unknown reason "${reason}"`);
  }
  return {
    matched: body.matched === true,
    reason: reason as WaitResult["reason"],
    state: state(body, what),
    exit: exitOrNull(body, what),
    offset: int(body, "offset", what),
    matchStart: optInt(body, "match_start", what),
    matchEnd: optInt(body, "match_end", what),
    ...(body.command !== undefined && body.command !== null ? { command: commandRecord(body.command as Json, `${what}.command`) } : {}),
  };
}

export function killed(body: Json): KilledResult {
  return { id: str(body, "id", "KILLED"), state: state(body, "KILLED"), exit: exitOrNull(body, "KILLED") };
}

export function logHeader(body: Json) {
  const what = "LOG";
  return {
    id: str(body, "id", what),
    start: int(body, "start", what),
    offset: int(body, "offset", what),
    length: int(body, "length", what),
    end: int(body, "end", what),
    state: state(body, what),
    exit: exitOrNull(body, what),
  };
}
