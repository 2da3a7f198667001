"""Command-aware sessions (protocol version 4, section 11), the pure part shared by Client
and AsyncClient: the request bodies of EXEC, COMMANDS and WATCH, and what their replies
become (CommandList, ExecResult, Event). Command records themselves are
protocol.CommandRecord, since LIST and WAITED carry them too.

Only these requests, START with `shell_integration` and a WAIT for a command, a prompt or
input use version 4 connections; everything else stays in version 2 (section 8), so that an
older daemon keeps answering it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ProtocolError, UnsupportedVersion
from .protocol import (CommandRecord, ExitStatus, check_id, exit_or_none, member,
                       record_or_none)

MAX_COMMAND_BYTES = 16384       # EXEC's `command` (11.4)
MAX_TIMEOUT_MS = 86400000       # EXEC's and WAIT's `timeout_ms`
INTERRUPT_GRACE = 5.0           # how long the daemon waits for the end after its Ctrl-C (11.4)
OUTPUT_PAGE_BYTES = 1048576     # READ's default max_bytes: the output is read in such pages
EXEC_STATES = ("exited", "waiting_for_input", "timeout", "interrupted", "session_ended")
EVENTS = ("command_start", "command_end", "prompt", "input", "exit")
WAIT_CONDITIONS = ("command", "prompt", "input")   # WAIT's version 4 conditions (11.5)


def exec_body(session_id: str, command: str, timeout: float | None, interrupt: bool) -> dict:
    """EXEC (11.4), checked as the daemon would check it: one line of 1..16384 bytes of
    UTF-8 without control characters but tab (a newline would run two commands)."""
    if not isinstance(command, str):
        raise ValueError("exec() takes the command line as a str")
    if not 1 <= len(command.encode("utf-8")) <= MAX_COMMAND_BYTES:
        raise ValueError(f"a command line is 1..{MAX_COMMAND_BYTES} bytes of UTF-8")
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in command):
        raise ValueError("a command line holds no control character but tab (one line)")
    body: dict = {"id": check_id(session_id), "command": command}
    if timeout is not None:
        body["timeout_ms"] = timeout_ms(timeout, low=1)
    if interrupt:
        body["interrupt"] = True
    return body


def timeout_ms(seconds: float, low: int = 0) -> int:
    ms = max(low, round(seconds * 1000))
    if ms > MAX_TIMEOUT_MS:
        raise ValueError(f"a timeout is at most {MAX_TIMEOUT_MS // 1000} seconds")
    return ms


def exec_reply_wait(timeout: float | None, interrupt: bool, slack: float) -> float:
    """How long to wait for EXECUTED: the daemon's own bound (30 s by default), its 5 s
    after Ctrl-C, and some slack."""
    return (30.0 if timeout is None else timeout) + (INTERRUPT_GRACE if interrupt else 0) + slack


def commands_body(session_id: str, since: int) -> dict:
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        raise ValueError(f"since is a seq >= 0, not {since!r}")
    body: dict = {"id": check_id(session_id)}
    if since:
        body["since"] = since
    return body


def commands_refusal(error: UnsupportedVersion, call: str) -> UnsupportedVersion:
    """A daemon older than version 4 refuses the header with unsupported_version (section
    8); none of these requests has an older form."""
    return UnsupportedVersion("the daemon does not offer command-aware sessions (protocol "
                              f"version 4, which {call} needs: upgrade ptyvisord); it said: "
                              f"{error.message}")


def as_text(data: bytes, encoding: str = "utf-8", errors: str = "replace") -> str:
    """Terminal output as a program's text: decoded, with the terminal's \\r\\n as \\n."""
    return data.decode(encoding, errors).replace("\r\n", "\n")


@dataclass(frozen=True)
class CommandList:
    """COMMAND_LIST (11.3): `commands` holds the ended records with seq > since, oldest
    first; `current` the running one; `first_seq` the oldest the daemon still keeps (0: none)."""

    id: str
    shell: str | None
    at_prompt: bool
    waiting_for_input: bool
    current: CommandRecord | None
    commands: list[CommandRecord]
    first_seq: int

    @classmethod
    def from_payload(cls, body: dict) -> "CommandList":
        records = member(body, "commands", list)
        return cls(id=member(body, "id", str), shell=member(body, "shell", str, None),
                   at_prompt=member(body, "at_prompt", bool),
                   waiting_for_input=member(body, "waiting_for_input", bool),
                   current=record_or_none(body.get("current")),
                   commands=[CommandRecord.from_payload(r) for r in records],
                   first_seq=member(body, "first_seq", int))


@dataclass(frozen=True)
class Executed:
    """EXECUTED (11.4), as the daemon sent it."""

    id: str
    state: str
    exit_code: int | None
    command: CommandRecord | None
    offset: int
    session_state: str

    @classmethod
    def from_payload(cls, body: dict) -> "Executed":
        state = member(body, "state", str)
        if state not in EXEC_STATES:
            raise ProtocolError(f"EXECUTED with state {state!r}")
        return cls(id=member(body, "id", str), state=state,
                   exit_code=member(body, "exit_code", int, None),
                   command=record_or_none(body.get("command")),
                   offset=member(body, "offset", int),
                   session_state=member(body, "session_state", str))

    def output_range(self, max_bytes: int | None) -> tuple[int, int, bool]:
        """[begin, end) of the output to read, and whether max_bytes cut it. A command that
        still runs (waiting_for_input, timeout) has written up to the log's end at the
        reply."""
        record = self.command
        if record is None:
            return 0, 0, False
        end = record.output_end if record.output_end is not None else self.offset
        end = max(end, record.output_start)
        if max_bytes is not None and end - record.output_start > max_bytes:
            return record.output_start, record.output_start + max(0, max_bytes), True
        return record.output_start, end, False


@dataclass(frozen=True)
class ExecResult:
    """What exec() returns.

    - `state`: "exited", "waiting_for_input" (it still runs: answer with send(), then
      wait(id, for_="command", after=seq - 1)), "timeout" (it still runs), "interrupted"
      (ended after Ctrl-C; exit_code is then 130 for most shells) or "session_ended".
    - `exit_code`: the command's status when it ended, else None.
    - `output`: the bytes it wrote through the terminal (line ends are \\r\\n, escape
      sequences kept), so far if it still runs; `truncated` when max_output_bytes cut them
      or the log no longer held their beginning. `text()` decodes them.
    - `seq` and `record`: its command record (None when it never started).
    """

    state: str
    exit_code: int | None
    output: bytes
    truncated: bool
    seq: int | None
    record: CommandRecord | None
    offset: int = 0
    session_state: str = ""

    def text(self, encoding: str = "utf-8", errors: str = "replace") -> str:
        """The output decoded, with \\r\\n as \\n: what the program printed."""
        return as_text(self.output, encoding, errors)

    @classmethod
    def build(cls, executed: Executed, output: bytes, truncated: bool) -> "ExecResult":
        record = executed.command
        return cls(state=executed.state, exit_code=executed.exit_code, output=output,
                   truncated=truncated, seq=record.seq if record else None, record=record,
                   offset=executed.offset, session_state=executed.session_state)


@dataclass(frozen=True)
class Event:
    """An EVENT of a WATCH (11.6). `event` is "command_start", "command_end" (both with
    `command`, the record), "prompt", "input" (with `since_ms`) or "exit" (with `exit`, the
    last one); `offset` is the log's end when it happened. An event this client does not
    know keeps its name, and its payload in `raw`."""

    event: str
    offset: int
    command: CommandRecord | None = None
    since_ms: int | None = None
    exit: ExitStatus | None = None
    raw: dict = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_payload(cls, body: dict) -> "Event":
        name = member(body, "event", str)
        command = record_or_none(body.get("command"))
        if name in ("command_start", "command_end") and command is None:
            raise ProtocolError(f"EVENT {name} without its command record")
        exit_status = exit_or_none(body.get("exit"))
        if name == "exit" and exit_status is None:
            raise ProtocolError("EVENT exit without the EXIT payload")
        return cls(event=name, offset=member(body, "offset", int), command=command,
                   since_ms=member(body, "since_ms", int, None), exit=exit_status, raw=body)


def wait_condition(until: str, for_: str | None) -> str:
    """wait()'s condition: `until` (positional, as before) or its alias `for_`."""
    if for_ is None:
        return until
    if until not in ("exit", for_):
        raise ValueError(f"wait() got until={until!r} and for_={for_!r}: give one")
    return for_


def check_after(after: Any, until: str) -> None:
    if after is None:
        return
    if until != "command":
        raise ValueError("after= goes with for_='command'")
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ValueError(f"after is a seq >= 0, not {after!r}")
