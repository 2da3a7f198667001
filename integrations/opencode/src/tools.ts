// The tools of the opencode-pty plugin (pty_spawn, pty_write, pty_read, pty_list, pty_kill,
// pty_wait), with their names and parameters, on ptyvisor sessions, and pty_screen: what the
// terminal shows now (the daemon's emulator, protocol section 10), and pty_exec: one command in
// a shell session, its exit code and its condensed output (protocol section 11). The sessions are detached:
// they live in ptyvisord, not in opencode, so they survive an opencode restart, and the daemon
// keeps their output log (2 MiB by default), their exit status, their screen, and runs WAIT itself.
import { tool } from "@opencode-ai/plugin";
import { Client, type ExitInfo, type Screen, ServerError, type SessionInfo, shellStatus, UnsupportedVersionError } from "ptyvisor";
import stripAnsi from "strip-ansi";

const DEFAULT_LIMIT = 500;
const MAX_LINE_LENGTH = 2000;
const WAIT_TAIL_LINES = 20;
/** The daemon bounds one WAIT at 24 h; a longer wait is several. */
const MAX_WAIT_MS = 86_400_000;
/** pty_exec's default budget for the output it shows: head and tail of it. */
const DEFAULT_EXEC_OUTPUT_BYTES = 8192;
/** The daemon keeps at most 1000 lines of scrollback per session (protocol 10.2). */
const MAX_SCROLLBACK = 1000;

/** What the plugin knows of a session beyond the daemon's record (lost on restart: optional). */
interface Annotation {
  title: string;
  description?: string;
  parentSessionId?: string;
  notifyOnExit: boolean;
}

export interface ToolsOptions {
  /** The ptyvisor client (default: PTYVISOR_SOCKET, else /run/ptyvisor/ptyvisor.sock). */
  client?: Client;
  /** Tells an opencode session something (used for the exit notification). */
  notify?: (sessionId: string, text: string) => Promise<void>;
}

/**
 * What pty_exec shows of a command's output [start, end) in the log: all of it within `budget`
 * bytes, else its head and its tail (half the budget each) around a marker that says how many
 * bytes were left out and where (log offsets). Escape sequences are stripped, \r\n is \n.
 */
export async function condensedOutput(client: Client, sessionId: string, start: number, end: number, budget: number): Promise<string> {
  const read = async (from: number, to: number) => {
    const pieces: Buffer[] = [];
    while (from < to) {
      const part = await client.read(sessionId, { from, maxBytes: to - from });
      if (part.data.length === 0) break;
      pieces.push(part.data);
      from = part.offset + part.data.length;
    }
    return clean(Buffer.concat(pieces));
  };
  if (end - start <= budget) return read(start, end);
  const half = Math.floor(budget / 2);
  const head = await read(start, start + half);
  const tail = await read(end - half, end);
  const left = end - start - 2 * half;
  const marker = `[... ${left} bytes left out: log offsets ${start + half} to ${end - half} (pty_read shows the whole log) ...]`;
  return `${head}${head.endsWith("\n") ? "" : "\n"}${marker}\n${tail}`;
}

function clean(bytes: Buffer): string {
  // A cut may fall inside a UTF-8 character: its pieces decode to U+FFFD, dropped at the edges.
  return stripAnsi(bytes.toString("utf8")).replace(/\r\n/g, "\n").replace(/^\uFFFD+|\uFFFD+$/g, "");
}

/** Our ids are "pty_" and the session's 32 hex digits; the bare 32 digits are accepted too. */
export function toPtyId(sessionId: string): string {
  return `pty_${sessionId}`;
}

function fromPtyId(id: string): string {
  const hex = id.startsWith("pty_") ? id.slice(4) : id;
  if (!/^[0-9a-f]{32}$/.test(hex)) throw new Error(`'${id}' is not a PTY session ID (pty_ and 32 hex digits). Use pty_list to see sessions.`);
  return hex;
}

/** Input as the agent writes it: \n, \r, \t, \xNN, \uNNNN and \\ become the characters. */
export function parseEscapes(input: string): string {
  return input.replace(/\\(x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|[nrt\\])/g, (whole, seq: string) => {
    if (seq[0] === "x" || seq[0] === "u") return String.fromCharCode(parseInt(seq.slice(1), 16));
    return ({ n: "\n", r: "\r", t: "\t", "\\": "\\" } as Record<string, string>)[seq] ?? whole;
  });
}

function statusOf(state: string, exit: ExitInfo | null): string {
  if (state !== "exited") return state;
  if (exit?.reason === "stopped") return "killed";
  return "exited";
}

function exitText(exit: ExitInfo | null): string {
  if (!exit) return "unknown";
  const signal = exit.status === "signaled" ? `, signal: ${exit.signal}` : "";
  return `${shellStatus(exit)}${signal}`;
}

/** The terminal's output as lines: escape sequences removed, carriage returns honoured. */
function toLines(data: Buffer): string[] {
  const text = stripAnsi(data.toString("utf8"));
  const lines = text.split(/\r?\n/).map((line) => {
    const cr = line.lastIndexOf("\r");
    return cr >= 0 ? line.slice(cr + 1) : line;
  });
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

function formatLine(line: string, number: number): string {
  const cut = line.length > MAX_LINE_LENGTH ? `${line.slice(0, MAX_LINE_LENGTH)}...` : line;
  return `${number.toString().padStart(5, "0")}| ${cut}`;
}

/**
 * The screen for an LLM: a one-line header (size, 1-based cursor, alternate screen, title),
 * the scrollback asked for, then the rows numbered from 1 as the cursor is, with the empty
 * rows at the bottom summed up in one line rather than printed.
 */
export function formatScreen(id: string, status: string, screen: Screen): string {
  const cursor = `row ${screen.cursor.row + 1}, col ${screen.cursor.col + 1}${screen.cursor.visible ? "" : " (hidden)"}`;
  const header = [
    `Size: ${screen.cols}x${screen.rows}`,
    `Cursor: ${cursor}`,
    `Alternate screen: ${screen.alternate ? "yes (a full-screen program)" : "no"}`,
    ...(screen.title !== "" ? [`Title: ${JSON.stringify(screen.title)}`] : []),
  ].join(" | ");
  let last = screen.lines.length;
  while (last > 0 && screen.lines[last - 1] === "") last--;
  const width = String(screen.rows).length;
  const numbered = (label: string, line: string) => (line === "" ? `${label}|` : `${label}| ${line}`);
  const rows = screen.lines.slice(0, last).map((line, i) => numbered(String(i + 1).padStart(width, " "), line));
  const out = [`<pty_screen id="${id}" status="${status}">`, header];
  if (screen.scrollback.length > 0) {
    out.push(`Scrollback (${screen.scrollback.length} lines above the screen, oldest first):`, ...screen.scrollback.map((line) => numbered(" ".repeat(width), line)));
  }
  out.push("Screen (rows numbered from 1):", ...rows);
  if (last === 0) out.push("(the screen is empty)");
  else if (last < screen.rows) out.push(last + 1 === screen.rows ? `(row ${screen.rows} is empty)` : `(rows ${last + 1}-${screen.rows} are empty)`);
  out.push("</pty_screen>");
  return out.join("\n");
}

function notFound(id: string): Error {
  return new Error(`PTY session '${id}' not found. Use pty_list to see active sessions.`);
}

export function createTools(options: ToolsOptions = {}) {
  const client = options.client ?? new Client();
  const annotations = new Map<string, Annotation>();

  /** Every byte the log still holds, in reads of at most 1 MiB. */
  async function readLog(sessionId: string): Promise<{ data: Buffer; start: number; state: string; exit: ExitInfo | null }> {
    const pieces: Buffer[] = [];
    let from = 0;
    let first = true;
    let start = 0;
    for (;;) {
      const part = await client.read(sessionId, { from });
      if (first) start = part.offset;
      first = false;
      pieces.push(part.data);
      from = part.offset + part.data.length;
      if (!part.more) return { data: Buffer.concat(pieces), start, state: part.state, exit: part.exit };
    }
  }

  async function find(id: string): Promise<SessionInfo> {
    const sessionId = fromPtyId(id);
    const info = (await client.list()).find((s) => s.id === sessionId);
    if (!info) throw notFound(id);
    return info;
  }

  function titleOf(info: SessionInfo): string {
    return annotations.get(info.id)?.title ?? info.argv.join(" ");
  }

  async function tail(sessionId: string): Promise<{ lines: string[]; count: number }> {
    const lines = toLines((await readLog(sessionId)).data);
    return { lines: lines.slice(-WAIT_TAIL_LINES).map((l, i) => formatLine(l, lines.length - Math.min(lines.length, WAIT_TAIL_LINES) + i + 1)), count: lines.length };
  }

  /** Waits on the daemon for the exit, then tells the opencode session (as opencode-pty does). */
  async function notifyWhenExited(sessionId: string, annotation: Annotation): Promise<void> {
    if (!options.notify || !annotation.parentSessionId) return;
    let waited;
    do waited = await client.wait(sessionId, { for: "exit", timeoutMs: MAX_WAIT_MS });
    while (waited.reason === "timeout");
    const { lines, count } = await tail(sessionId);
    const last = [...lines].reverse().find((l) => l.slice(7).trim() !== "")?.slice(7) ?? "";
    const code = waited.exit ? shellStatus(waited.exit) : 255;
    const text = [
      "<pty_exited>",
      `ID: ${toPtyId(sessionId)}`,
      `Description: ${annotation.description ?? annotation.title}`,
      `Exit Code: ${code}`,
      `Output Lines: ${count}`,
      `Last Line: ${last}`,
      "</pty_exited>",
      "",
      code === 0 ? "Use pty_read to check the full output." : "Process failed. Use pty_read with the pattern parameter to search for errors in the output.",
    ].join("\n");
    await options.notify(annotation.parentSessionId, text);
  }

  const pty_spawn = tool({
    description:
      "Start a command on a new pseudo-terminal, in the background (a ptyvisor session: it keeps running across opencode restarts). Returns its ID at once; use pty_wait, pty_read, pty_write and pty_kill with it.",
    args: {
      command: tool.schema.string().describe("The command/executable to run"),
      args: tool.schema.array(tool.schema.string()).optional().describe("Arguments to pass to the command"),
      workdir: tool.schema.string().optional().describe("Working directory for the PTY session"),
      env: tool.schema.record(tool.schema.string(), tool.schema.string()).optional().describe("Additional environment variables"),
      title: tool.schema.string().optional().describe("Human-readable title for the session"),
      shellIntegration: tool.schema
        .boolean()
        .optional()
        .describe("ptyvisor extension: start bash or zsh (command, with no args but -i, -l or --login) with shell integration, so that pty_exec can run commands in it (default: false)"),
      description: tool.schema.string().describe("Clear, concise description of what this PTY session is for in 5-10 words"),
      notifyOnExit: tool.schema.boolean().optional().describe("If true, sends a notification to the session when the process exits (default: false)"),
    },
    async execute(args, ctx) {
      const argv = [args.command, ...(args.args ?? [])];
      const workdir = args.workdir ?? ctx?.directory ?? process.cwd();
      const started = await client.start(argv, {
        cwd: workdir,
        env: { ...process.env, ...(args.env ?? {}) },
        term: "xterm-256color",
        cols: 120,
        rows: 40,
        shellIntegration: args.shellIntegration ?? false,
      });
      const annotation: Annotation = {
        title: args.title ?? argv.join(" "),
        description: args.description,
        parentSessionId: ctx?.sessionID,
        notifyOnExit: args.notifyOnExit ?? false,
      };
      annotations.set(started.id, annotation);
      if (annotation.notifyOnExit) void notifyWhenExited(started.id, annotation).catch(() => {});
      return [
        "<pty_spawned>",
        `ID: ${toPtyId(started.id)}`,
        `Title: ${annotation.title}`,
        `Command: ${argv.join(" ")}`,
        `Workdir: ${workdir}`,
        `PID: ${started.pid}`,
        "Status: running",
        "</pty_spawned>",
      ].join("\n");
    },
  });

  const pty_write = tool({
    description:
      "Send input to a PTY session, as typed: end a command with \\r (Enter). Escapes: \\n \\r \\t \\xNN \\uNNNN \\\\. Ctrl-C is \\x03, Ctrl-D \\x04, Escape \\x1b.",
    args: {
      id: tool.schema.string().describe("The PTY session ID (e.g., pty_ and 32 hex digits)"),
      data: tool.schema.string().describe("The input data to send to the PTY"),
    },
    async execute(args) {
      const sessionId = fromPtyId(args.id);
      const bytes = parseEscapes(args.data);
      try {
        await client.send(sessionId, bytes);
      } catch (e) {
        if (e instanceof ServerError && e.code === "session_ended") {
          throw new Error(`Cannot write to PTY '${args.id}' - session status is 'exited'.`, { cause: e });
        }
        if (e instanceof ServerError && e.code === "no_such_session") throw notFound(args.id);
        throw e;
      }
      const preview = args.data.length > 50 ? `${args.data.slice(0, 50)}...` : args.data;
      return `Sent ${Buffer.byteLength(bytes)} bytes to ${args.id}: "${preview}"`;
    },
  });

  const pty_read = tool({
    description:
      "Read a PTY session's output as numbered lines (escape sequences removed), or only the lines matching a regular expression.",
    args: {
      id: tool.schema.string().describe("The PTY session ID (e.g., pty_ and 32 hex digits)"),
      offset: tool.schema.number().optional().describe("Line number to start reading from (0-based, defaults to 0). When using pattern, this applies to filtered matches."),
      limit: tool.schema.number().optional().describe("Number of lines to read (defaults to 500). When using pattern, this applies to filtered matches."),
      pattern: tool.schema.string().optional().describe("Regex pattern to filter lines. When set, only matching lines are returned, then offset/limit apply to the matches."),
      ignoreCase: tool.schema.boolean().optional().describe("Case-insensitive pattern matching (default: false)"),
    },
    async execute(args) {
      const sessionId = fromPtyId(args.id);
      let log;
      try {
        log = await readLog(sessionId);
      } catch (e) {
        if (e instanceof ServerError && e.code === "no_such_session") throw notFound(args.id);
        throw e;
      }
      const status = statusOf(log.state, log.exit);
      const lines = toLines(log.data);
      const offset = Math.max(0, Math.floor(args.offset ?? 0));
      const limit = Math.max(1, Math.floor(args.limit ?? DEFAULT_LIMIT));
      const dropped = log.start > 0 ? [`(The first ${log.start} bytes of output are no longer kept.)`] : [];
      if (args.pattern !== undefined) {
        let regex: RegExp;
        try {
          regex = new RegExp(args.pattern, args.ignoreCase ? "i" : "");
        } catch (e) {
          throw new Error(`Invalid regex pattern '${args.pattern}': ${(e as Error).message}`, { cause: e });
        }
        const matches = lines.map((text, i) => ({ text, number: i + 1 })).filter((l) => regex.test(l.text));
        const shown = matches.slice(offset, offset + limit);
        const head = `<pty_output id="${args.id}" status="${status}" pattern="${args.pattern}">`;
        if (matches.length === 0) {
          return [head, `No lines matched the pattern '${args.pattern}'.`, `Total lines in buffer: ${lines.length}`, "</pty_output>"].join("\n");
        }
        const more = offset + shown.length < matches.length;
        return [
          head,
          ...dropped,
          ...shown.map((m) => formatLine(m.text, m.number)),
          "",
          more
            ? `(${shown.length} of ${matches.length} matches shown. Use offset=${offset + shown.length} to see more.)`
            : `(${matches.length} match${matches.length === 1 ? "" : "es"} from ${lines.length} total lines)`,
          "</pty_output>",
        ].join("\n");
      }
      const shown = lines.slice(offset, offset + limit);
      const head = `<pty_output id="${args.id}" status="${status}">`;
      if (shown.length === 0) {
        return [head, "(No output available - buffer is empty)", `Total lines: ${lines.length}`, "</pty_output>"].join("\n");
      }
      const more = offset + shown.length < lines.length;
      return [
        head,
        ...dropped,
        ...shown.map((line, i) => formatLine(line, offset + i + 1)),
        "",
        more
          ? `(Buffer has more lines. Use offset=${offset + shown.length} to read beyond line ${offset + shown.length})`
          : `(End of buffer - total ${lines.length} lines)`,
        "</pty_output>",
      ].join("\n");
    },
  });

  const pty_list = tool({
    description: "List the PTY sessions (running, and exited ones whose logs are still kept), with their status and exit code.",
    args: {},
    async execute() {
      const sessions = await client.list();
      if (sessions.length === 0) return "<pty_list>\nNo active PTY sessions.\n</pty_list>";
      const out = ["<pty_list>"];
      for (const s of sessions) {
        const exit = s.state === "exited" ? ` (exit: ${exitText(s.exit)})` : "";
        out.push(`[${toPtyId(s.id)}] ${titleOf(s)}`);
        out.push(`  Command: ${s.argv.join(" ")}`);
        out.push(`  Status: ${statusOf(s.state, s.exit)}${exit}`);
        out.push(`  PID: ${s.pid} | Bytes: ${s.offset} | Workdir: ${s.cwd || "(unknown)"}`);
        out.push(`  Created: ${new Date(s.created * 1000).toISOString()}`);
        out.push("");
      }
      out.push(`Total: ${sessions.length} session(s)`);
      out.push("</pty_list>");
      return out.join("\n");
    },
  });

  const pty_kill = tool({
    description: "Stop a PTY session (every process in it) and wait until it has ended. Its log stays readable for a while.",
    args: {
      id: tool.schema.string().describe("The PTY session ID (e.g., pty_ and 32 hex digits)"),
      cleanup: tool.schema.boolean().optional().describe("If true, forgets the session's title and description here (the daemon drops its log after its retention time) (default: false)"),
    },
    async execute(args) {
      const before = await find(args.id);
      const killed = await client.kill(before.id);
      const lines = toLines((await readLog(before.id).catch(() => ({ data: Buffer.alloc(0) }))).data).length;
      const title = titleOf(before);
      if (args.cleanup) annotations.delete(before.id);
      const action = before.state !== "exited" ? "Killed" : "Cleaned up";
      return [
        "<pty_killed>",
        `${action}: ${args.id}${args.cleanup ? " (session removed)" : " (session retained for log access)"}`,
        `Title: ${title}`,
        `Command: ${before.argv.join(" ")}`,
        `Exit: ${exitText(killed.exit)}`,
        `Final line count: ${lines}`,
        "</pty_killed>",
      ].join("\n");
    },
  });

  const pty_wait = tool({
    description:
      "Wait for a PTY session to exit (or, with pattern, for its output to match a regular expression; with quietMs, for its output to pause), then show its status and the last lines. The daemon does the waiting.",
    args: {
      id: tool.schema.string().describe("The PTY session ID (e.g., pty_ and 32 hex digits)"),
      timeoutSeconds: tool.schema
        .number()
        .optional()
        .describe("Maximum time to wait in seconds. If the session is still running after this, returns a <pty_wait_timeout> result instead of blocking forever. Default: no limit."),
      pattern: tool.schema.string().optional().describe("ptyvisor extension: wait until the output (from its start) matches this RE2 regular expression, instead of waiting for the exit"),
      quietMs: tool.schema.number().optional().describe("ptyvisor extension: wait until no output has come for this many milliseconds"),
      forInput: tool.schema
        .boolean()
        .optional()
        .describe("ptyvisor extension: wait until the program waits for input on the terminal (a prompt, a question, a shell's prompt), so you know when to pty_write an answer"),
    },
    async execute(args, ctx) {
      const sessionId = fromPtyId(args.id);
      const deadline = args.timeoutSeconds === undefined ? Infinity : Date.now() + Math.max(0, args.timeoutSeconds * 1000);
      let waited;
      try {
        do {
          const timeoutMs = Math.max(1, Math.min(MAX_WAIT_MS, deadline - Date.now()));
          const signal = ctx?.abort;
          if (args.pattern !== undefined) waited = await client.wait(sessionId, { for: "text", pattern: args.pattern, timeoutMs, signal });
          else if (args.forInput) waited = await client.wait(sessionId, { for: "input", timeoutMs, signal });
          else if (args.quietMs !== undefined) waited = await client.wait(sessionId, { for: "quiet", quietMs: args.quietMs, timeoutMs, signal });
          else waited = await client.wait(sessionId, { for: "exit", timeoutMs, signal });
        } while (waited.reason === "timeout" && Date.now() < deadline);
      } catch (e) {
        if (e instanceof ServerError && e.code === "no_such_session") throw notFound(args.id);
        throw e;
      }
      if (waited.reason === "timeout") {
        return [
          "<pty_wait_timeout>",
          `Session is still running after ${Math.max(0, args.timeoutSeconds ?? 0)}s.`,
          "Use pty_read for live output, pty_kill to stop it, or call pty_wait again with a longer timeout.",
          "</pty_wait_timeout>",
        ].join("\n");
      }
      const info = (await client.list()).find((s) => s.id === sessionId);
      const { lines, count } = await tail(sessionId);
      return [
        "<pty_waited>",
        `ID: ${args.id}`,
        `Title: ${info ? titleOf(info) : ""}`,
        `Command: ${info?.argv.join(" ") ?? ""}`,
        `Status: ${statusOf(waited.state, waited.exit)}`,
        `Condition: ${waited.reason}${waited.matched ? " (matched)" : ""}`,
        `Exit: ${waited.state === "exited" ? exitText(waited.exit) : "still running"}`,
        `Output Lines: ${count}`,
        ...(lines.length > 0 ? ["", "Tail:", ...lines] : []),
        "</pty_waited>",
      ].join("\n");
    },
  });

  const pty_screen = tool({
    description:
      "Show what a PTY session's terminal screen looks like now, as a person would see it: its rows as text, the cursor, the title, and whether a full-screen program (vim, less, top, a TUI) is on the alternate screen. Use it instead of pty_read for full-screen programs and progress bars, whose raw output is redrawn in place.",
    args: {
      id: tool.schema.string().describe("The PTY session ID (e.g., pty_ and 32 hex digits)"),
      scrollback: tool.schema
        .number()
        .optional()
        .describe(`Also show up to this many lines that scrolled off the top of the screen (default 0, at most ${MAX_SCROLLBACK})`),
    },
    async execute(args, ctx) {
      const sessionId = fromPtyId(args.id);
      const scrollback = Math.max(0, Math.min(MAX_SCROLLBACK, Math.floor(args.scrollback ?? 0)));
      let screen: Screen;
      let info: SessionInfo;
      try {
        info = await find(args.id);
        screen = await client.snapshot(sessionId, { scrollback, signal: ctx?.abort });
      } catch (e) {
        if (e instanceof UnsupportedVersionError) {
          throw new Error("This ptyvisord does not offer screen snapshots (it is older than protocol version 3). Use pty_read to see the output.", { cause: e });
        }
        if (e instanceof ServerError && e.code === "no_such_session") throw notFound(args.id);
        if (e instanceof ServerError && e.code === "internal") {
          throw new Error(`The screen of '${args.id}' is not available right now (${e.serverMessage}). Try pty_screen again in a moment, or use pty_read.`, { cause: e });
        }
        throw e;
      }
      return formatScreen(args.id, statusOf(info.state, info.exit), screen);
    },
  });

  const pty_exec = tool({
    description:
      "Run one command line in a shell PTY session (bash or zsh) and return its exit code and its output (head and tail within a byte budget, escape sequences stripped). Without id, starts a new shell session for it and returns its ID for later calls: the shell keeps its directory and variables between commands. If the command waits for input, returns at once saying so: answer with pty_write, then pty_wait.",
    args: {
      command: tool.schema.string().describe("One command line (no newline), as typed at the shell's prompt"),
      id: tool.schema.string().optional().describe("A PTY session started with shellIntegration (default: a new bash session)"),
      timeoutSeconds: tool.schema.number().optional().describe("Maximum time to wait for the command, in seconds (default 30)"),
      interrupt: tool.schema.boolean().optional().describe("At the timeout, send Ctrl-C to the command (default: false: it keeps running)"),
      maxOutputBytes: tool.schema.number().optional().describe(`Budget for the output shown (default ${DEFAULT_EXEC_OUTPUT_BYTES})`),
    },
    async execute(args, ctx) {
      let sessionId: string;
      if (args.id !== undefined) sessionId = fromPtyId(args.id);
      else {
        const workdir = ctx?.directory ?? process.cwd();
        sessionId = (await client.start(["bash"], { cwd: workdir, env: process.env, cols: 120, rows: 40, shellIntegration: true })).id;
        annotations.set(sessionId, { title: "shell for pty_exec", parentSessionId: ctx?.sessionID, notifyOnExit: false });
      }
      const timeoutMs = Math.max(1, Math.min(MAX_WAIT_MS, Math.round((args.timeoutSeconds ?? 30) * 1000)));
      let result;
      try {
        // The output is read here, head and tail only: exec() need not read it all.
        result = await client.exec(sessionId, args.command, { timeoutMs, interrupt: args.interrupt ?? false, maxOutputBytes: 0, signal: ctx?.abort });
      } catch (e) {
        if (e instanceof UnsupportedVersionError) throw new Error("This ptyvisord cannot run commands in a shell (it is older than protocol version 4). Use pty_spawn and pty_wait.", { cause: e });
        if (e instanceof ServerError && e.code === "no_such_session") throw notFound(args.id ?? "");
        if (e instanceof ServerError && e.code === "no_shell_integration") {
          throw new Error(`PTY '${args.id}' reports no commands: start a shell with pty_spawn and shellIntegration: true, or call pty_exec without id.`, { cause: e });
        }
        if (e instanceof ServerError && e.code === "busy") throw new Error(`PTY '${args.id}' is running another pty_exec: wait for it, or use another session.`, { cause: e });
        throw e;
      }
      const budget = Math.max(0, Math.floor(args.maxOutputBytes ?? DEFAULT_EXEC_OUTPUT_BYTES));
      const record = result.record;
      const output = record ? await condensedOutput(client, sessionId, record.outputStart, record.outputEnd ?? Math.max(record.outputStart, result.offset), budget) : "";
      const next: Record<string, string> = {
        waiting_for_input: "The command waits for input: answer with pty_write (end a line with \\r), then pty_wait.",
        timeout: "The command still runs: pty_wait for it, pty_read its output, or pty_write \\x03 to interrupt it.",
        session_ended: "The shell session has exited.",
      };
      return [
        "<pty_exec>",
        `ID: ${toPtyId(sessionId)}`,
        `Command: ${args.command}`,
        `State: ${result.state}`,
        `Exit code: ${result.exitCode ?? "none"}`,
        ...(record?.cwd ? [`Directory: ${record.cwd}`] : []),
        ...(next[result.state] ? [next[result.state]] : []),
        "Output:",
        // Its last line's newline is the join's: output that ends a line does not add an empty one.
        output.endsWith("\n") ? output.slice(0, -1) : output,
        "</pty_exec>",
      ].join("\n");
    },
  });

  return { pty_spawn, pty_write, pty_read, pty_list, pty_kill, pty_wait, pty_screen, pty_exec };
}
