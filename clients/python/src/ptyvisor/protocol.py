"""The wire format of docs/protocol.md: frames, their bounds, and the JSON payloads.

Everything here is pure (no I/O), shared by the blocking and the asyncio clients. Every
header from the daemon is validated (section 2.2) before its payload is buffered, and every
JSON payload is checked to be one object: a daemon that breaks the protocol gets
ProtocolError, never a crash or an unbounded buffer.
"""

from __future__ import annotations

import enum
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from .errors import ProtocolError

MAGIC = b"PV"
VERSION = 2            # the version this client speaks (section 8)
HEADER_SIZE = 8
_HEADER = struct.Struct(">2sBBI")

DEFAULT_SOCKET_PATH = "/run/ptyvisor/ptyvisor.sock"   # src/client/default_socket.h
SOCKET_ENVIRONMENT_VARIABLE = "PTYVISOR_SOCKET"

MAX_IO_PAYLOAD = 65536


class FrameType(enum.IntEnum):
    START = 1
    STARTED = 2
    INPUT = 3
    OUTPUT = 4
    RESIZE = 5
    SIGNAL = 6
    STOP = 7
    EXIT = 8
    ERROR = 9
    STATUS_REQUEST = 10
    STATUS = 11
    ATTACH = 12
    ATTACHED = 13
    DETACH = 14
    DETACHED = 15
    LIST = 16
    SESSIONS = 17
    READ = 18
    LOG = 19
    WAIT = 20
    WAITED = 21
    KILL = 22
    KILLED = 23
    SEND = 24
    SENT = 25
    DROPPED = 26


_K256 = 262144
_K4 = 4096
# (min, max) payload length per type: sections 2.1 and 9.3.
BOUNDS: dict[int, tuple[int, int]] = {
    FrameType.START: (2, _K256), FrameType.STARTED: (2, _K4),
    FrameType.INPUT: (1, MAX_IO_PAYLOAD), FrameType.OUTPUT: (1, MAX_IO_PAYLOAD),
    FrameType.RESIZE: (2, _K4), FrameType.SIGNAL: (2, _K4), FrameType.STOP: (0, 0),
    FrameType.EXIT: (2, _K4), FrameType.ERROR: (2, _K4), FrameType.STATUS_REQUEST: (0, 0),
    FrameType.STATUS: (2, _K256), FrameType.ATTACH: (2, _K4), FrameType.ATTACHED: (2, _K256),
    FrameType.DETACH: (0, 0), FrameType.DETACHED: (2, _K4), FrameType.LIST: (0, 0),
    FrameType.SESSIONS: (2, _K256), FrameType.READ: (2, _K4), FrameType.LOG: (2, _K4),
    FrameType.WAIT: (2, _K4), FrameType.WAITED: (2, _K4), FrameType.KILL: (2, _K4),
    FrameType.KILLED: (2, _K4), FrameType.SEND: (33, 32 + MAX_IO_PAYLOAD),
    FrameType.SENT: (2, _K4), FrameType.DROPPED: (2, _K4),
}


def default_socket_path() -> str:
    """PTYVISOR_SOCKET if set and non-empty, else the daemon's default path (as the CLI)."""
    return os.environ.get(SOCKET_ENVIRONMENT_VARIABLE) or DEFAULT_SOCKET_PATH


def encode_frame(ftype: int, payload: bytes = b"") -> bytes:
    return _HEADER.pack(MAGIC, VERSION, ftype, len(payload)) + payload


def encode_json_frame(ftype: int, body: dict) -> bytes:
    return encode_frame(ftype, json.dumps(body, separators=(",", ":"),
                                          ensure_ascii=False).encode())


def parse_header(header: bytes) -> tuple[int, int]:
    """(type, length) of a frame header from the daemon, validated as section 2.2 says."""
    magic, version, ftype, length = _HEADER.unpack(header)
    if magic != MAGIC:
        raise ProtocolError("the daemon sent a frame with bad magic")
    if version not in (1, 2):
        raise ProtocolError(f"the daemon sent a frame of version {version}")
    bounds = BOUNDS.get(ftype)
    if bounds is None:
        raise ProtocolError(f"the daemon sent a frame of unknown type {ftype}")
    if not bounds[0] <= length <= bounds[1]:
        raise ProtocolError(f"the daemon sent a {FrameType(ftype).name} of {length} bytes")
    return ftype, length


class FrameDecoder:
    """Reassembles frames from a byte stream (a frame may span reads; a read may hold many)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes | memoryview) -> None:
        self._buffer += data

    def frames(self):
        """Yields every complete (type, payload) buffered so far."""
        buf = self._buffer
        pos = 0
        try:
            while len(buf) - pos >= HEADER_SIZE:
                ftype, length = parse_header(bytes(buf[pos:pos + HEADER_SIZE]))
                end = pos + HEADER_SIZE + length
                if len(buf) < end:
                    break
                yield ftype, bytes(buf[pos + HEADER_SIZE:end])
                pos = end
        finally:
            del buf[:pos]


def decode_json(ftype: int, payload: bytes) -> dict:
    """One JSON object, as section 3 requires, or ProtocolError."""
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"{FrameType(ftype).name}: not JSON ({e})") from None
    if not isinstance(body, dict):
        raise ProtocolError(f"{FrameType(ftype).name}: not a JSON object")
    return body


_MISSING = object()


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
class SessionInfo:
    """One entry of SESSIONS (9.5)."""

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

    @classmethod
    def from_payload(cls, body: dict) -> "SessionInfo":
        argv = member(body, "argv", list, [])
        if not all(isinstance(a, str) for a in argv):
            raise ProtocolError("'argv' holds a non-string")
        return cls(id=member(body, "id", str), unit=member(body, "unit", str, ""), argv=argv,
                   cwd=member(body, "cwd", str, ""), state=member(body, "state", str, ""),
                   exit=exit_or_none(body.get("exit")), pid=member(body, "pid", int, 0),
                   start=member(body, "start", int, 0), offset=member(body, "offset", int, 0),
                   clients=member(body, "clients", int, 0),
                   created=member(body, "created", int, 0),
                   detached=member(body, "detached", bool, False), raw=body)


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
    """WAITED (9.7)."""

    matched: bool
    reason: str
    state: str
    exit: ExitStatus | None
    offset: int
    match_start: int | None = None
    match_end: int | None = None

    @classmethod
    def from_payload(cls, body: dict) -> "Waited":
        return cls(matched=member(body, "matched", bool), reason=member(body, "reason", str),
                   state=member(body, "state", str, ""), exit=exit_or_none(body.get("exit")),
                   offset=member(body, "offset", int, 0),
                   match_start=member(body, "match_start", int, None),
                   match_end=member(body, "match_end", int, None))


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
        size = member(body, "size", dict, {})
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
