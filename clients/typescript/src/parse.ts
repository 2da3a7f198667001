// Turns the daemon's JSON replies into typed values. Every member is checked: a reply that
// breaks the protocol is a ProtocolError, never a value of the wrong type passed on.
import { ProtocolError } from "./errors.js";
import type { AttachedInfo, ExitInfo, KilledResult, SessionInfo, SessionState, StartedInfo, WaitResult } from "./types.js";

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
  };
}

export function waited(body: Json): WaitResult {
  const what = "WAITED";
  const reason = str(body, "reason", what);
  if (!["exit", "quiet", "text", "timeout", "exited", "gone"].includes(reason)) {
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
