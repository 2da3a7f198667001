// The screen of a session (docs/protocol.md, section 10): what its terminal shows now, as the
// daemon's emulator (libvterm) sees it. SCREEN is checked member by member against 10.3 before
// it becomes a Screen: a reply that breaks the protocol is a ProtocolError, never a Screen
// whose lines and size disagree.
import { ProtocolError } from "./errors.js";

/** What SNAPSHOT may ask for (10.2). */
export interface SnapshotOptions {
  /** How many of the newest lines that scrolled off the top to include (0..10000, default 0; the daemon keeps 1000). */
  scrollback?: number;
  /** Include the colours and styles of the visible cells (default false). */
  attributes?: boolean;
  signal?: AbortSignal;
}

export interface Cursor {
  /** 0-based from the top; < rows. */
  row: number;
  /** 0-based from the left; < cols. */
  col: number;
  /** false after `CSI ? 25 l`. */
  visible: boolean;
}

/** A palette entry 0..255, or "#rrggbb". */
export type Colour = number | string;

/** Cells `col .. col + width - 1` of row `row` that share a look other than the default (10.3). */
export interface AttributeRun {
  row: number;
  col: number;
  width: number;
  bold?: true;
  italic?: true;
  blink?: true;
  reverse?: true;
  strike?: true;
  /** 1 single, 2 double, 3 curly. */
  underline?: 1 | 2 | 3;
  fg?: Colour;
  bg?: Colour;
}

/** A session's terminal at one moment (SCREEN, 10.3). */
export class Screen {
  /** The session. */
  readonly id: string;
  readonly cols: number;
  readonly rows: number;
  readonly cursor: Cursor;
  /** The alternate screen (vim, less, top: `CSI ? 1049 h`) is shown. */
  readonly alternate: boolean;
  /** The last title set by OSC 0 or OSC 2; "" if none. */
  readonly title: string;
  /** The screen shows the effect of every byte of the session's log before this offset. */
  readonly offset: number;
  /** Exactly `rows` strings, top first, trailing spaces removed (as `tmux capture-pane -p`). */
  readonly lines: string[];
  /** Lines that scrolled off the top, oldest first (at most what was asked for). */
  readonly scrollback: string[];
  /** The runs of cells with colours or styles; only when asked for. */
  readonly attributes?: AttributeRun[];

  constructor(fields: Omit<Screen, "text">) {
    this.id = fields.id;
    this.cols = fields.cols;
    this.rows = fields.rows;
    this.cursor = fields.cursor;
    this.alternate = fields.alternate;
    this.title = fields.title;
    this.offset = fields.offset;
    this.lines = fields.lines;
    this.scrollback = fields.scrollback;
    if (fields.attributes !== undefined) this.attributes = fields.attributes;
  }

  /**
   * The text, as `tmux capture-pane -p` (and `ptyvisor screen`) print it: the scrollback that
   * was asked for, then every row of the screen, each line ending with "\n".
   */
  text(): string {
    return [...this.scrollback, ...this.lines].map((line) => `${line}\n`).join("");
  }
}

type Json = Record<string, unknown>;

const WHAT = "SCREEN";
/** Section 10.3: the size's bounds, and the title's. */
const MAX_SIDE = 65535;
const MAX_CELLS = 1_000_000;
const MAX_TITLE_BYTES = 1024;
/** A row never holds a control character (10.3): what a terminal would interpret. */
// eslint-disable-next-line no-control-regex -- matching control characters is its purpose
const CONTROL = /[\u0000-\u001f\u007f]/;
const FLAGS = ["bold", "italic", "blink", "reverse", "strike"] as const;

function bad(detail: string): never {
  throw new ProtocolError(`${WHAT}: ${detail}`);
}

function integer(body: Json, member: string, min: number, max: number, where = WHAT): number {
  const v = body[member];
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw new ProtocolError(`${where}: member "${member}" is missing, not an integer, or outside ${min}..${max}`);
  }
  return v;
}

function boolean(body: Json, member: string, where = WHAT): boolean {
  const v = body[member];
  if (typeof v !== "boolean") throw new ProtocolError(`${where}: member "${member}" is missing or not a boolean`);
  return v;
}

function textLines(value: unknown, member: string): string[] {
  if (!Array.isArray(value)) bad(`member "${member}" is missing or not an array`);
  value.forEach((line, i) => {
    if (typeof line !== "string") bad(`${member}[${i}] is not a string`);
    if (CONTROL.test(line)) bad(`${member}[${i}] holds a control character`);
  });
  return value as string[];
}

function colour(run: Json, member: "fg" | "bg", where: string): Colour | undefined {
  const v = run[member];
  if (v === undefined) return undefined;
  if (typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 255) return v;
  if (typeof v === "string" && /^#[0-9a-fA-F]{6}$/.test(v)) return v;
  throw new ProtocolError(`${where}: member "${member}" is neither 0..255 nor "#rrggbb"`);
}

function attributeRuns(value: unknown, cols: number, rows: number): AttributeRun[] {
  if (!Array.isArray(value)) bad(`member "attributes" is missing or not an array (they were asked for)`);
  const runs: AttributeRun[] = [];
  // Runs come in row, then column, order and do not overlap: each begins at or after `next`.
  let next = { row: 0, col: 0 };
  value.forEach((item, i) => {
    const where = `${WHAT}: attributes[${i}]`;
    if (item === null || typeof item !== "object" || Array.isArray(item)) bad(`attributes[${i}] is not an object`);
    const body = item as Json;
    const row = integer(body, "row", 0, rows - 1, where);
    const col = integer(body, "col", 0, cols - 1, where);
    const width = integer(body, "width", 1, cols - col, where);
    if (row < next.row || (row === next.row && col < next.col)) bad(`attributes[${i}] overlaps or comes before the run ahead of it`);
    next = { row, col: col + width };
    const run: AttributeRun = { row, col, width };
    for (const flag of FLAGS) {
      if (body[flag] === undefined) continue;
      if (body[flag] !== true) throw new ProtocolError(`${where}: member "${flag}" is present but not true`);
      run[flag] = true;
    }
    if (body.underline !== undefined) run.underline = integer(body, "underline", 1, 3, where) as 1 | 2 | 3;
    const fg = colour(body, "fg", where);
    const bg = colour(body, "bg", where);
    if (fg !== undefined) run.fg = fg;
    if (bg !== undefined) run.bg = bg;
    runs.push(run);
  });
  return runs;
}

/** SCREEN's payload, checked against 10.3 and against the SNAPSHOT that asked for it. */
export function parseScreen(body: Json, asked: { id: string; scrollback: number; attributes: boolean }): Screen {
  const id = body.id;
  if (id !== asked.id) bad(`member "id" is ${JSON.stringify(id)}, not the session asked for`);
  const cols = integer(body, "cols", 1, MAX_SIDE);
  const rows = integer(body, "rows", 1, MAX_SIDE);
  if (cols * rows > MAX_CELLS) bad(`${cols} x ${rows} cells is more than ${MAX_CELLS}`);
  const cursorBody = body.cursor;
  if (cursorBody === null || typeof cursorBody !== "object" || Array.isArray(cursorBody)) bad(`member "cursor" is missing or not an object`);
  const cursor: Cursor = {
    row: integer(cursorBody as Json, "row", 0, rows - 1, `${WHAT}: cursor`),
    col: integer(cursorBody as Json, "col", 0, cols - 1, `${WHAT}: cursor`),
    visible: boolean(cursorBody as Json, "visible", `${WHAT}: cursor`),
  };
  const title = body.title;
  if (typeof title !== "string") bad(`member "title" is missing or not a string`);
  if (Buffer.byteLength(title, "utf8") > MAX_TITLE_BYTES) bad(`the title is longer than ${MAX_TITLE_BYTES} bytes`);
  const lines = textLines(body.lines, "lines");
  if (lines.length !== rows) bad(`${lines.length} lines for ${rows} rows`);
  const scrollback = textLines(body.scrollback, "scrollback");
  if (scrollback.length > asked.scrollback) bad(`${scrollback.length} lines of scrollback, ${asked.scrollback} asked for`);
  return new Screen({
    id: asked.id,
    cols,
    rows,
    cursor,
    alternate: boolean(body, "alternate"),
    title,
    offset: integer(body, "offset", 0, Number.MAX_SAFE_INTEGER),
    lines,
    scrollback,
    // Not asked for: not looked at, and not passed on.
    attributes: asked.attributes ? attributeRuns(body.attributes, cols, rows) : undefined,
  });
}
