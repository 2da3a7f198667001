"""The wire format of docs/protocol.md: frames, their bounds, and the JSON payloads.

Everything here is pure (no I/O), shared by the blocking and the asyncio clients. Every
header from the daemon is validated (section 2.2) before its payload is buffered, and every
JSON payload is checked to be one object: a daemon that breaks the protocol gets
ProtocolError, never a crash or an unbounded buffer.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar, overload

from .errors import ProtocolError

# The wire's constants are part of this module's interface: the clients and the tests use them
# from here, hence the explicit re-exports ("X as X"; pyflakes needs its noqa all the same).
from ._wire import (  # noqa: F401
                    BOUNDS as BOUNDS, FROM_DAEMON as FROM_DAEMON, HEADER_SIZE as HEADER_SIZE,
                    LAST_TYPE_OF_VERSION as LAST_TYPE_OF_VERSION, MAGIC as MAGIC,
                    NEWEST_VERSION as NEWEST_VERSION, OLDEST_VERSION as OLDEST_VERSION,
                    REQUIRED_MEMBERS as REQUIRED_MEMBERS, FrameType as FrameType)

VERSION = 2            # the version of every connection but SNAPSHOT's (section 8)
SCREEN_VERSION = 3     # SNAPSHOT/SCREEN (section 10) exist from this version on
COMMANDS_VERSION = 4   # shell_integration, COMMANDS, EXEC, WATCH, WAIT for a command (11)
PROFILES_VERSION = 6   # START's `profile`, and EXIT's reasons of the profile's limits (13)
_HEADER = struct.Struct(">2sBBI")

DEFAULT_SOCKET_PATH = "/run/ptyvisor/ptyvisor.sock"   # src/client/default_socket.h
SOCKET_ENVIRONMENT_VARIABLE = "PTYVISOR_SOCKET"

MAX_IO_PAYLOAD = BOUNDS[FrameType.INPUT][1]


class FrameError(ProtocolError):
    """A frame or payload the protocol refuses; `wire_error` is the ERROR code a daemon would
    answer it with (bad_frame, unsupported_version, too_big), as section 2.2 orders them."""

    def __init__(self, wire_error: str, message: str) -> None:
        super().__init__(message)
        self.wire_error = wire_error


def default_socket_path() -> str:
    """PTYVISOR_SOCKET if set and non-empty, else the daemon's default path (as the CLI)."""
    return os.environ.get(SOCKET_ENVIRONMENT_VARIABLE) or DEFAULT_SOCKET_PATH


def encode_frame(ftype: int, payload: bytes = b"", version: int = VERSION) -> bytes:
    return _HEADER.pack(MAGIC, version, ftype, len(payload)) + payload


def encode_json_frame(ftype: int, body: dict, version: int = VERSION) -> bytes:
    return encode_frame(ftype, json.dumps(body, separators=(",", ":"),
                                          ensure_ascii=False).encode(), version)


def parse_header(header: bytes, connection_version: int = VERSION) -> tuple[int, int]:
    """(type, length) of a frame header from the daemon, validated as section 2.2 says.
    A connection accepts frames of its own version and below (the daemon writes version 1
    before it has read the first frame, section 8); a type must exist in the frame's own
    version."""
    magic, version, ftype, length = _HEADER.unpack(header)
    if magic != MAGIC:
        raise FrameError("bad_frame", "the daemon sent a frame with bad magic")
    if not OLDEST_VERSION <= version <= min(connection_version, NEWEST_VERSION):
        raise FrameError("unsupported_version", f"the daemon sent a frame of version {version} "
                         f"in a version {connection_version} connection")
    bounds = BOUNDS.get(ftype)
    if bounds is None or ftype > LAST_TYPE_OF_VERSION[version]:
        raise FrameError("bad_frame", f"the daemon sent a frame of unknown type {ftype}")
    if length > bounds[1]:
        raise FrameError("too_big", f"the daemon sent a {FrameType(ftype).name} of {length} "
                         f"bytes, over its {bounds[1]}")
    if length < bounds[0]:
        raise FrameError("bad_frame", f"the daemon sent a {FrameType(ftype).name} of {length} "
                         f"bytes, under its {bounds[0]}")
    return ftype, length


class FrameDecoder:
    """Reassembles frames from a byte stream (a frame may span reads; a read may hold many)."""

    def __init__(self, version: int = VERSION) -> None:
        self._buffer = bytearray()
        self.version = version   # the connection's: frames of a higher one are refused

    def feed(self, data: bytes | memoryview) -> None:
        self._buffer += data

    def frames(self):
        """Yields every complete (type, payload) buffered so far."""
        buf = self._buffer
        pos = 0
        try:
            while len(buf) - pos >= HEADER_SIZE:
                ftype, length = parse_header(bytes(buf[pos:pos + HEADER_SIZE]),
                                             self.version)
                end = pos + HEADER_SIZE + length
                if len(buf) < end:
                    break
                yield ftype, bytes(buf[pos + HEADER_SIZE:end])
                pos = end
        finally:
            del buf[:pos]


_JSON_TYPES = {"string": (str,), "integer": (int,), "boolean": (bool,), "object": (dict,),
               "array": (list,), "null": (type(None),)}


def _json_type_is(value: Any, kind: str) -> bool:
    if kind == "integer" and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES[kind])


def decode_json(ftype: int, payload: bytes) -> dict:
    """One JSON object, as section 3 requires, with the members its type requires, each of
    its JSON type (protocol/protocol.json); else FrameError bad_frame."""
    name = FrameType(ftype).name
    try:
        body = json.loads(payload.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise FrameError("bad_frame", f"{name}: not JSON ({e})") from None
    if not isinstance(body, dict):
        raise FrameError("bad_frame", f"{name}: not a JSON object")
    for member_name, kinds in REQUIRED_MEMBERS.get(name, {}).items():
        if member_name not in body:
            raise FrameError("bad_frame", f"{name} without {member_name!r}")
        if not any(_json_type_is(body[member_name], kind) for kind in kinds):
            raise FrameError("bad_frame", f"{name}: {member_name!r} is not {' or '.join(kinds)}")
    return body


_MISSING = object()


_Kind = TypeVar("_Kind")
_Default = TypeVar("_Default")


# The overloads give each call the type it checked for, so that callers need no casts.
@overload
def member(body: dict, name: str, kind: type[_Kind]) -> _Kind: ...
@overload
def member(body: dict, name: str, kind: type[_Kind], default: _Default) -> _Kind | _Default: ...


def member(body: dict, name: str, kind: type, default: Any = _MISSING) -> Any:
    """body[name] if it is of `kind` (int excludes bool); `default` when it is absent or
    null; ProtocolError when it has another type, or is required (no default) and missing."""
    value = body.get(name)
    if value is None:
        if default is _MISSING:
            raise ProtocolError(f"a reply without {name!r}")
        return default
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ProtocolError(f"{name!r} is {type(value).__name__}, not {kind.__name__}")
    return value


def position(value: str | int | None, default: str) -> str | int:
    """A `from` member (section 9.1): "start", "tail" or an absolute offset."""
    if value is None:
        return default
    if value in ("start", "tail"):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
        return value
    raise ValueError(f"a position is 'start', 'tail' or an offset >= 0, not {value!r}")


def session_environment(env: dict[str, str] | None) -> list[str]:
    """START's `env`: NAME=VALUE strings. Variables the protocol cannot carry (a name that is
    empty or holds '=', NUL, or bytes that are not UTF-8) are left out."""
    if env is None:
        env = dict(os.environ)
    out = []
    for name, value in env.items():
        entry = f"{name}={value}"
        if not name or "=" in name or "\0" in entry:
            continue
        try:
            entry.encode("utf-8")
        except UnicodeEncodeError:
            continue
        out.append(entry)
    return out


@dataclass(frozen=True)
class ExitStatus:
    """EXIT (section 5.5): how the session's command ended, and why the session did."""

    status: str
    reason: str
    code: int | None = None
    signal: int | None = None
    core_dumped: bool = False
    unit_result: str = ""

    @classmethod
    def from_payload(cls, body: dict) -> "ExitStatus":
        status, reason = member(body, "status", str), member(body, "reason", str)
        code = member(body, "code", int, None) if status == "exited" else None
        sig = member(body, "signal", int, None) if status == "signaled" else None
        return cls(status=status, reason=reason, code=code, signal=sig,
                   core_dumped=member(body, "core_dumped", bool, False),
                   unit_result=member(body, "unit_result", str, ""))

    @property
    def shell_status(self) -> int:
        """One number, as a shell reports it: code, 128 + signal, or 255 when unknown."""
        if self.status == "exited" and isinstance(self.code, int):
            return self.code
        if self.status == "signaled" and isinstance(self.signal, int):
            return 128 + self.signal
        return 255


def exit_or_none(value: Any) -> ExitStatus | None:
    """A reply's `exit`: null while the session runs, else an EXIT payload."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProtocolError("'exit' is neither null nor an object")
    return ExitStatus.from_payload(value)


@dataclass(frozen=True)
class Started:
    """STARTED (5.2): the session's id (version 2), unit name and main pid (0 if unknown)."""

    id: str
    unit: str
    pid: int

    @classmethod
    def from_payload(cls, body: dict) -> "Started":
        if "id" not in body:
            raise ProtocolError("STARTED without id: the daemon does not speak version 2")
        return cls(id=member(body, "id", str), unit=member(body, "unit", str),
                   pid=member(body, "pid", int, 0))


@dataclass(frozen=True)
class CommandRecord:
    """A command record (11.2): one command line the session's shell ran. Its output is the
    log's bytes [output_start, output_end); `output_end`, `exit_code` and `ended_ms` are
    None while it runs (`exit_code` also when the shell reported no status)."""

    seq: int
    command: str
    cwd: str
    output_start: int
    output_end: int | None
    exit_code: int | None
    started_ms: int
    ended_ms: int | None

    @property
    def running(self) -> bool:
        return self.output_end is None

    @classmethod
    def from_payload(cls, body: Any) -> "CommandRecord":
        if not isinstance(body, dict):
            raise ProtocolError("a command record is not an object")
        record = cls(seq=member(body, "seq", int), command=member(body, "command", str, ""),
                     cwd=member(body, "cwd", str, ""),
                     output_start=member(body, "output_start", int),
                     output_end=member(body, "output_end", int, None),
                     exit_code=member(body, "exit_code", int, None),
                     started_ms=member(body, "started_ms", int, 0),
                     ended_ms=member(body, "ended_ms", int, None))
        if record.output_end is not None and record.output_end < record.output_start:
            raise ProtocolError("a command record whose output ends before it starts")
        if record.exit_code is not None and record.exit_code > 255:
            raise ProtocolError(f"a command record with exit code {record.exit_code}")
        return record


def record_or_none(value: Any) -> CommandRecord | None:
    """A `command` member: null, or a command record."""
    return None if value is None else CommandRecord.from_payload(value)


USAGE_MEMBERS = ("cpu_usec", "memory_current", "memory_peak", "tasks_current", "tasks_peak",
                 "oom_kills", "tasks_limit_hits", "io_read_bytes", "io_write_bytes")


@dataclass(frozen=True)
class Usage:
    """LIST's `usage` (13.3): what a session has cost, from its cgroup. Each figure is None
    where this host does not count it (the daemon leaves the member out). CPU time in
    microseconds, memory and I/O in bytes."""

    cpu_usec: int | None = None
    memory_current: int | None = None
    memory_peak: int | None = None
    tasks_current: int | None = None
    tasks_peak: int | None = None
    oom_kills: int | None = None
    tasks_limit_hits: int | None = None
    io_read_bytes: int | None = None
    io_write_bytes: int | None = None

    @classmethod
    def from_payload(cls, body: Any) -> "Usage":
        if not isinstance(body, dict):
            raise ProtocolError("'usage' is not an object")
        # member() refuses negatives, bools and non-integers; members this client does not
        # know are a later version's and are left out, as section 3 says.
        figures = {name: member(body, name, int, None) for name in USAGE_MEMBERS}
        for name, value in figures.items():
            if value is not None and value >= 2**64:
                raise ProtocolError(f"usage {name!r} is {value}, over 64 bits")
        return cls(**figures)


def usage_or_none(value: Any) -> Usage | None:
    """LIST's `usage`: absent (None) when the daemon knows no figure of the session."""
    return None if value is None else Usage.from_payload(value)


@dataclass(frozen=True)
class SessionInfo:
    """One entry of SESSIONS (9.5), with the members of 11.5, which the daemon sends only
    when they are not null or false: `shell` ("bash", "zsh" or None), `at_prompt`,
    `waiting_for_input`, `waiting_since` (Unix ms) and `last_command` (the running record,
    else the newest ended one); and those of 13.3, sent only when known: `profile` (the
    session's sandbox profile, None: none) and `usage` (a Usage, None: no figures)."""

    id: str
    unit: str
    argv: list[str]
    cwd: str
    state: str
    exit: ExitStatus | None
    pid: int
    start: int
    offset: int
    clients: int
    created: int
    detached: bool
    raw: dict = field(repr=False, compare=False, default_factory=dict)
    shell: str | None = None
    at_prompt: bool = False
    waiting_for_input: bool = False
    waiting_since: int | None = None
    last_command: CommandRecord | None = None
    profile: str | None = None
    usage: Usage | None = None

    @classmethod
    def from_payload(cls, body: dict) -> "SessionInfo":
        argv: list[Any] = member(body, "argv", list, [])
        if not all(isinstance(a, str) for a in argv):
            raise ProtocolError("'argv' holds a non-string")
        return cls(id=member(body, "id", str), unit=member(body, "unit", str, ""), argv=argv,
                   cwd=member(body, "cwd", str, ""), state=member(body, "state", str, ""),
                   exit=exit_or_none(body.get("exit")), pid=member(body, "pid", int, 0),
                   start=member(body, "start", int, 0), offset=member(body, "offset", int, 0),
                   clients=member(body, "clients", int, 0),
                   created=member(body, "created", int, 0),
                   detached=member(body, "detached", bool, False), raw=body,
                   shell=member(body, "shell", str, None),
                   at_prompt=member(body, "at_prompt", bool, False),
                   waiting_for_input=member(body, "waiting_for_input", bool, False),
                   waiting_since=member(body, "waiting_since", int, None),
                   last_command=record_or_none(body.get("last_command")),
                   profile=member(body, "profile", str, None),
                   usage=usage_or_none(body.get("usage")))


@dataclass(frozen=True)
class Log:
    """READ's answer (9.6): `data` is the log from `offset`; `offset` > the position asked
    for means bytes were dropped, `offset + len(data) < end` means there is more."""

    id: str
    start: int
    offset: int
    end: int
    state: str
    exit: ExitStatus | None
    data: bytes


@dataclass(frozen=True)
class Waited:
    """WAITED (9.7; `command`, the record of the command that ended, for a WAIT for a
    command, 11.5)."""

    matched: bool
    reason: str
    state: str
    exit: ExitStatus | None
    offset: int
    match_start: int | None = None
    match_end: int | None = None
    command: CommandRecord | None = None

    @classmethod
    def from_payload(cls, body: dict) -> "Waited":
        return cls(matched=member(body, "matched", bool), reason=member(body, "reason", str),
                   state=member(body, "state", str, ""), exit=exit_or_none(body.get("exit")),
                   offset=member(body, "offset", int, 0),
                   match_start=member(body, "match_start", int, None),
                   match_end=member(body, "match_end", int, None),
                   command=record_or_none(body.get("command")))


@dataclass(frozen=True)
class Killed:
    """KILLED (9.8)."""

    id: str
    state: str
    exit: ExitStatus | None

    @classmethod
    def from_payload(cls, body: dict) -> "Killed":
        return cls(id=member(body, "id", str, ""), state=member(body, "state", str, ""),
                   exit=exit_or_none(body.get("exit")))


@dataclass(frozen=True)
class Attached:
    """ATTACHED (9.4): the log's bounds now and `offset`, where the OUTPUT that follows
    begins."""

    id: str
    unit: str
    pid: int
    role: str
    start: int
    end: int
    offset: int
    state: str
    rows: int
    cols: int

    @classmethod
    def from_payload(cls, body: dict) -> "Attached":
        size: dict[str, Any] = member(body, "size", dict, {})
        return cls(id=member(body, "id", str, ""), unit=member(body, "unit", str, ""),
                   pid=member(body, "pid", int, 0), role=member(body, "role", str, ""),
                   start=member(body, "start", int, 0), end=member(body, "end", int, 0),
                   offset=member(body, "offset", int), state=member(body, "state", str, ""),
                   rows=member(size, "rows", int, 0), cols=member(size, "cols", int, 0))


def check_id(session_id: str) -> str:
    """A session id: 32 lowercase hex digits (9.3's SEND frame carries them raw)."""
    if (not isinstance(session_id, str) or len(session_id) != 32
            or any(c not in "0123456789abcdef" for c in session_id)):
        raise ValueError(f"a session id is 32 lowercase hex digits, not {session_id!r}")
    return session_id


# -- the screen (section 10) ------------------------------------------------------------

MAX_SCROLLBACK = 10000          # SNAPSHOT's `scrollback` bound (10.2)
MAX_SCREEN_CELLS = 1000000      # cols × rows (10.3)
MAX_TITLE_BYTES = 1024
_UNDERLINE_STYLES = (1, 2, 3)   # single, double, curly
_STYLE_FLAGS = ("bold", "italic", "blink", "reverse", "strike")
_CONTROL_CHARACTERS = frozenset(map(chr, [*range(0x20), 0x7F]))


def snapshot_body(session_id: str, scrollback: int, attributes: bool) -> dict:
    """SNAPSHOT (10.2). Members left at their defaults are not sent."""
    if (not isinstance(scrollback, int) or isinstance(scrollback, bool)
            or not 0 <= scrollback <= MAX_SCROLLBACK):
        raise ValueError(f"scrollback is 0..{MAX_SCROLLBACK} lines, not {scrollback!r}")
    if not isinstance(attributes, bool):
        raise ValueError(f"attributes is True or False, not {attributes!r}")
    body: dict = {"id": check_id(session_id)}
    if scrollback:
        body["scrollback"] = scrollback
    if attributes:
        body["attributes"] = True
    return body


def _bounded_int(body: dict, name: str, low: int, high: int) -> int:
    value = member(body, name, int)
    if not low <= value <= high:
        raise ProtocolError(f"SCREEN: {name!r} is {value}, not in {low}..{high}")
    return value


def _check_utf8(text: str, name: str) -> None:
    """JSON's \\ud800 escapes decode to lone surrogates, which are not UTF-8 (section 3)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolError(f"SCREEN: {name!r} is not valid UTF-8") from None


def _text_rows(value: Any, name: str) -> list[str]:
    """`lines` or `scrollback`: strings that a terminal can print back as they are (10.3
    promises no control characters: a row echoed to a terminal cannot drive it)."""
    if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
        raise ProtocolError(f"SCREEN: {name!r} is not an array of strings")
    for line in value:
        if not _CONTROL_CHARACTERS.isdisjoint(line):
            raise ProtocolError(f"SCREEN: a row of {name!r} holds a control character")
        _check_utf8(line, name)
    return value


class Cursor(NamedTuple):
    """The cursor of a SCREEN, 0-based from the top left; `visible` is False after
    CSI ? 25 l. A tuple: `row, col, visible = screen.cursor` works."""

    row: int
    col: int
    visible: bool


@dataclass(frozen=True)
class AttributeRun:
    """`width` cells of row `row` from column `col` that share a look other than the default
    (10.3). `fg`/`bg`: a palette index 0..255, a "#rrggbb" string, or None for the default
    colour; `underline`: 0 none, 1 single, 2 double, 3 curly."""

    row: int
    col: int
    width: int
    bold: bool = False
    italic: bool = False
    blink: bool = False
    reverse: bool = False
    strike: bool = False
    underline: int = 0
    fg: int | str | None = None
    bg: int | str | None = None

    @classmethod
    def from_payload(cls, body: Any, rows: int, cols: int) -> "AttributeRun":
        if not isinstance(body, dict):
            raise ProtocolError("SCREEN: an attribute run is not an object")
        row = _bounded_int(body, "row", 0, rows - 1)
        col = _bounded_int(body, "col", 0, cols - 1)
        width = _bounded_int(body, "width", 1, cols - col)
        flags = {name: member(body, name, bool, False) for name in _STYLE_FLAGS}
        underline = member(body, "underline", int, 0)
        if underline not in (0, *_UNDERLINE_STYLES):
            raise ProtocolError(f"SCREEN: underline {underline} is not 1, 2 or 3")
        run = cls(row=row, col=col, width=width, underline=underline,
                  fg=_colour(body, "fg"), bg=_colour(body, "bg"), **flags)
        if run.is_default():
            raise ProtocolError("SCREEN: an attribute run with the default look")
        return run

    def is_default(self) -> bool:
        return (not any(getattr(self, name) for name in _STYLE_FLAGS) and not self.underline
                and self.fg is None and self.bg is None)


def _colour(body: dict, name: str) -> int | str | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255:
        return value
    if (isinstance(value, str) and len(value) == 7 and value[0] == "#"
            and all(c in "0123456789abcdefABCDEF" for c in value[1:])):
        return value
    raise ProtocolError(f"SCREEN: {name!r} is {value!r}, not 0..255 or \"#rrggbb\"")


@dataclass(frozen=True)
class Screen:
    """SCREEN (10.3): what the session's terminal shows. `lines` holds exactly `rows` rows,
    top first, without trailing spaces; `scrollback` the lines that scrolled off the top,
    oldest first; `offset` the log offset whose output the screen shows all of;
    `attributes` the runs of non-default cells, or None when they were not asked for."""

    id: str
    cols: int
    rows: int
    cursor: Cursor
    alternate: bool
    title: str
    offset: int
    lines: list[str]
    scrollback: list[str]
    attributes: list[AttributeRun] | None = None

    def text(self, scrollback: bool = False) -> str:
        """The rows joined with newlines (tmux capture-pane -p prints the same rows, each
        ending with a newline). scrollback=True puts the scrollback first, as
        capture-pane -p -S - does."""
        return "\n".join((self.scrollback if scrollback else []) + self.lines)

    @classmethod
    def from_payload(cls, body: dict, session_id: str | None = None,
                     scrollback: int = MAX_SCROLLBACK,
                     attributes: bool | None = None) -> "Screen":
        """Validates a SCREEN against 10.3 and against what SNAPSHOT asked for: the session
        `session_id` (None: any), at most `scrollback` lines, and the attribute runs if
        `attributes` is True, none if False (None: either). ProtocolError otherwise."""
        sid = member(body, "id", str)
        if session_id is not None and sid != session_id:
            raise ProtocolError(f"SCREEN of session {sid!r}, asked for {session_id!r}")
        cols = _bounded_int(body, "cols", 1, 65535)
        rows = _bounded_int(body, "rows", 1, 65535)
        if cols * rows > MAX_SCREEN_CELLS:
            raise ProtocolError(f"SCREEN: {cols} x {rows} cells is over {MAX_SCREEN_CELLS}")
        cursor_body = member(body, "cursor", dict)
        cursor = Cursor(_bounded_int(cursor_body, "row", 0, rows - 1),
                        _bounded_int(cursor_body, "col", 0, cols - 1),
                        member(cursor_body, "visible", bool))
        title = member(body, "title", str)
        _check_utf8(title, "title")
        if len(title.encode()) > MAX_TITLE_BYTES or "\0" in title:
            raise ProtocolError(f"SCREEN: a title over {MAX_TITLE_BYTES} bytes, or with NUL")
        lines = _text_rows(body.get("lines"), "lines")
        if len(lines) != rows:
            raise ProtocolError(f"SCREEN: {len(lines)} lines for {rows} rows")
        older = _text_rows(body.get("scrollback"), "scrollback")
        if len(older) > scrollback:
            raise ProtocolError(f"SCREEN: {len(older)} scrollback lines, {scrollback} asked")
        runs = None
        if attributes or (attributes is None and body.get("attributes") is not None):
            runs = cls._runs(member(body, "attributes", list), rows, cols)
        elif "attributes" in body and attributes is False:
            raise ProtocolError("SCREEN: attributes that were not asked for")
        return cls(id=sid, cols=cols, rows=rows, cursor=cursor,
                   alternate=member(body, "alternate", bool), title=title,
                   offset=_bounded_int(body, "offset", 0, 2**64 - 1), lines=lines,
                   scrollback=older, attributes=runs)

    @staticmethod
    def _runs(items: list, rows: int, cols: int) -> list[AttributeRun]:
        """The runs, which must come in row then column order without overlapping."""
        runs = []
        next_free = (0, 0)    # the first cell the next run may begin at
        for item in items:
            run = AttributeRun.from_payload(item, rows, cols)
            if (run.row, run.col) < next_free:
                raise ProtocolError(f"SCREEN: the attribute run at row {run.row}, column "
                                    f"{run.col} overlaps or is out of order")
            next_free = (run.row, run.col + run.width)
            runs.append(run)
        return runs
