"""The session calls of protocol version 2 (section 9), the screen of version 3 (section
10) and the command-aware sessions of version 4 (section 11), blocking.

Each call is one connection: START (detached) returns the id; attach() and watch() keep
their connection open (an Attachment, a Watch); list, read, wait, kill, send, snapshot,
commands and exec ask once and return the reply. A connection speaks the oldest version that
has its request (the version is per connection, section 8): snapshot() version 3; commands(),
exec(), watch(), start(shell_integration=True) and wait() for a command, a prompt or input
version 4; every other one version 2, so that an older daemon answers them as before.
Timeouts are in seconds, as Python's are; None waits as long as the daemon takes.
"""

from __future__ import annotations

import os

from . import commands as cmds
from . import protocol
from .commands import CommandList, Event, ExecResult, Executed
from .connection import Connection, Relay, deadline_after, expect_reply, open_directory
from .errors import ConnectionLost, ProtocolError, UnsupportedVersion, error_from_payload
from .profiles import check_profile, start_refusal, start_version
from .protocol import (Attached, ExitStatus, FrameType, Killed, Log, Screen, SessionInfo,
                       Started, Waited, check_id, member, position)

MAX_READ_BYTES = 67108864   # READ's max_bytes bound (9.6)

_SLACK = 10.0   # how much longer than the daemon's own timeout we wait for its reply


def start_body(argv, cwd_fd: int, env, term, rows: int, cols: int, detach: bool,
               shell_integration: bool = False, profile: str | None = None) -> dict:
    argv = [str(a) for a in argv]
    if not argv or not argv[0]:
        raise ValueError("argv needs a non-empty argv[0]")
    st = os.fstat(cwd_fd)
    body = {"argv": argv, "env": protocol.session_environment(env), "cwd_dev": st.st_dev,
            "cwd_ino": st.st_ino, "rows": int(rows), "cols": int(cols)}
    if term:
        body["term"] = term
    if detach:
        body["detach"] = True
    if shell_integration:
        body["shell_integration"] = True
    if check_profile(profile) is not None:
        body["profile"] = profile
    return body


def wait_body(session_id, until, pattern, quiet, offset, timeout, after=None) -> dict:
    cmds.check_after(after, until)
    body: dict = {"id": check_id(session_id), "for": until}
    if until == "text":
        if pattern is None:
            raise ValueError("wait(until='text') needs a pattern")
        body["pattern"] = pattern.decode() if isinstance(pattern, bytes) else pattern
        body["from"] = position(offset, "start")
    elif until == "quiet":
        if quiet is None:
            raise ValueError("wait(until='quiet') needs quiet (seconds)")
        body["quiet_ms"] = max(1, round(quiet * 1000))
    elif until == "command":
        if after is not None:
            body["after"] = after
    elif until not in ("exit", *cmds.WAIT_CONDITIONS):
        raise ValueError("until is 'exit', 'quiet', 'text', 'command', 'prompt' or 'input', "
                         f"not {until!r}")
    if timeout is not None:
        body["timeout_ms"] = max(0, round(timeout * 1000))
    return body


def wait_version(until: str) -> int:
    return protocol.COMMANDS_VERSION if until in cmds.WAIT_CONDITIONS else protocol.VERSION


def kill_body(session_id, signal) -> dict:
    body: dict = {"id": check_id(session_id)}
    if signal:
        body["signal"] = int(signal)
    return body


def send_payload(session_id, data) -> bytes:
    if isinstance(data, str):
        data = data.encode()
    if not 1 <= len(data) <= protocol.MAX_IO_PAYLOAD:
        raise ValueError("send() takes 1..65536 bytes")
    return check_id(session_id).encode() + bytes(data)


def log_length(head: dict) -> int:
    """LOG's `length`: the bytes that follow, at most what READ may ask for (9.6)."""
    length = member(head, "length", int)
    if length > MAX_READ_BYTES:
        raise ProtocolError(f"LOG announces {length} bytes")
    return length


def log_from(head: dict, data: bytes) -> Log:
    return Log(id=member(head, "id", str, ""), start=member(head, "start", int, 0),
               offset=member(head, "offset", int, 0), end=member(head, "end", int, 0),
               state=member(head, "state", str, ""),
               exit=protocol.exit_or_none(head.get("exit")), data=data)


def sessions_from(body: dict) -> list[SessionInfo]:
    sessions = member(body, "sessions", list)
    if not all(isinstance(s, dict) for s in sessions):
        raise ProtocolError("SESSIONS holds a non-object")
    return [SessionInfo.from_payload(s) for s in sessions]


def screen_from(body: dict, request: dict) -> Screen:
    """SCREEN validated against 10.3 and against the SNAPSHOT that asked for it."""
    return Screen.from_payload(body, request["id"], request.get("scrollback", 0),
                               request.get("attributes", False))


def snapshot_refusal(error: UnsupportedVersion) -> UnsupportedVersion:
    """A daemon that speaks only versions 1 and 2 refuses the version 3 header with
    unsupported_version (section 8): say what that means for snapshot()."""
    return UnsupportedVersion("the daemon does not speak protocol version 3, which "
                              f"snapshot() needs (upgrade ptyvisord); it said: {error.message}")


class Client:
    """Talks to one daemon. `socket_path` defaults to $PTYVISOR_SOCKET, else
    /run/ptyvisor/ptyvisor.sock; `timeout` bounds each reply (not wait()'s own wait)."""

    def __init__(self, socket_path: str | None = None, timeout: float | None = 30.0):
        self.socket_path = socket_path or protocol.default_socket_path()
        self.timeout = timeout

    def _connect(self) -> Connection:
        return Connection(self.socket_path)

    def _ask(self, ftype: int, payload: bytes, reply: int, timeout: float | None = -1,
             version: int = protocol.VERSION) -> dict:
        conn = Connection(self.socket_path, version)
        try:
            conn.send_frame(ftype, payload)
            return expect_reply(conn, reply, deadline_after(self.timeout if timeout == -1
                                                            else timeout))
        finally:
            conn.close()

    def _ask_v4(self, call: str, ftype: int, body: dict, reply: int,
                timeout: float | None = -1) -> dict:
        """A request of version 4; an older daemon's refusal says what is missing."""
        try:
            return self._ask(ftype, protocol_json(body), reply, timeout,
                             protocol.COMMANDS_VERSION)
        except UnsupportedVersion as e:
            raise cmds.commands_refusal(e, call) from None

    def start(self, argv, *, cwd=None, env: dict[str, str] | None = None,
              term: str | None = "xterm-256color", rows: int = 24, cols: int = 80,
              shell_integration: bool = False, profile: str | None = None) -> Started:
        """Starts argv detached (it outlives this call) and returns its Started (.id).
        shell_integration=True: argv is bash or zsh (options -i, -l, --login only), started
        with the daemon's integration script so that exec(), commands() and watch() know its
        commands (protocol 11.2). profile: the sandbox profile to run it under (protocol 13;
        None: the daemon's default_profile); one the configuration does not offer raises
        ProfileNotAllowed, one this host cannot enforce ProfileUnavailable, and a daemon
        without protocol version 6 UnsupportedVersion."""
        check_profile(profile)
        conn = Connection(self.socket_path, start_version(shell_integration, profile))
        try:
            fd = open_directory(cwd)
            try:
                conn.send_start(start_body(argv, fd, env, term, rows, cols, True,
                                           shell_integration, profile), fd)
            finally:
                os.close(fd)
            return Started.from_payload(expect_reply(conn, FrameType.STARTED,
                                                     deadline_after(self.timeout)))
        except UnsupportedVersion as e:
            raise start_refusal(e, "start", shell_integration, profile) from None
        finally:
            conn.close()

    def attach(self, session_id: str, *, role: str = "controller", offset="tail",
               takeover: bool = False) -> "Attachment":
        """Attaches as controller or observer; output begins at `offset` ("start", "tail"
        or an absolute offset)."""
        if role not in ("controller", "observer"):
            raise ValueError("role is 'controller' or 'observer'")
        body = {"id": check_id(session_id), "from": position(offset, "tail"), "role": role}
        if takeover:
            body["takeover"] = True
        conn = self._connect()
        try:
            conn.send_json(FrameType.ATTACH, body)
            head = Attached.from_payload(expect_reply(conn, FrameType.ATTACHED,
                                                      deadline_after(self.timeout)))
        except BaseException:
            conn.close()
            raise
        return Attachment(conn, head, self)

    def list(self) -> list[SessionInfo]:
        """The sessions, oldest first (running ones and recently exited detached ones)."""
        return sessions_from(self._ask(FrameType.LIST, b"", FrameType.SESSIONS))

    def read(self, session_id: str, offset="start", max_bytes: int | None = None) -> Log:
        """The session's log from `offset`, at most max_bytes (the daemon's default 1 MiB).
        Never waits for output."""
        body: dict = {"id": check_id(session_id), "from": position(offset, "start")}
        if max_bytes is not None:
            body["max_bytes"] = int(max_bytes)
        conn = self._connect()
        try:
            conn.send_json(FrameType.READ, body)
            deadline = deadline_after(self.timeout)
            head = expect_reply(conn, FrameType.LOG, deadline)
            length = log_length(head)
            relay = Relay(conn, member(head, "offset", int, 0))
            while len(relay.pending) < length and not relay.ended:
                if not relay.pump(deadline):
                    raise TimeoutError("the daemon did not send the log in time")
            if len(relay.pending) < length:
                raise ConnectionLost("the log ended early")
            if len(relay.pending) > length:
                raise ProtocolError(f"LOG announced {length} bytes and sent more")
            return log_from(head, relay.take())
        finally:
            conn.close()

    def wait(self, session_id: str, until: str = "exit", *, pattern=None,
             quiet: float | None = None, offset=None, timeout: float | None = 30.0,
             for_: str | None = None, after: int | None = None) -> Waited:
        """Waits on the daemon for the session to exit, to print `pattern` (an RE2 regular
        expression over the raw bytes, from `offset`), or to go `quiet` seconds without
        output, at most `timeout` seconds. Waited.reason says which held, or "timeout".
        Version 4 (shell integration, protocol 11.5): until (or for_) "command" waits for
        the end of a command whose seq is greater than `after` (default: the next one to
        end) and puts its record in Waited.command; "prompt" for the shell's prompt;
        "input" until the session waits for input."""
        until = cmds.wait_condition(until, for_)
        body = wait_body(session_id, until, pattern, quiet, offset, timeout, after)
        wait_for = None if timeout is None else timeout + _SLACK
        if timeout is None:
            wait_for = 86400.0 + _SLACK
        if until in cmds.WAIT_CONDITIONS:
            return Waited.from_payload(self._ask_v4(f"wait(for_={until!r})", FrameType.WAIT,
                                                    body, FrameType.WAITED, wait_for))
        return Waited.from_payload(self._ask(FrameType.WAIT, protocol_json(body),
                                             FrameType.WAITED, wait_for))

    def kill(self, session_id: str, signal: int | None = None) -> Killed:
        """Without signal: ends the session as STOP does, and returns once it has exited.
        With a signal (1..64): sends it to the session's processes and returns at once."""
        return Killed.from_payload(self._ask(FrameType.KILL, protocol_json(kill_body(
            session_id, signal)), FrameType.KILLED, None if not signal else -1))

    def send(self, session_id: str, data: bytes | str) -> int:
        """Writes data to the session's input without attaching; returns the bytes taken."""
        body = self._ask(FrameType.SEND, send_payload(session_id, data), FrameType.SENT)
        return member(body, "bytes", int)

    def snapshot(self, session_id: str, scrollback: int = 0, attributes: bool = False) -> Screen:
        """What the session's terminal shows now, as the daemon's emulator sees it: every
        byte the session wrote before this call is drawn (Screen.offset says up to where).
        `scrollback`: how many of the newest lines that scrolled off the top to add (0..10000;
        the daemon keeps 1000); `attributes`: add the colours and styles (Screen.attributes).
        Raises NoSuchSession for an unknown id, Internal when the screen is not available
        right now (ask again), UnsupportedVersion from a daemon without version 3."""
        request = protocol.snapshot_body(session_id, scrollback, attributes)
        conn = Connection(self.socket_path, protocol.SCREEN_VERSION)
        try:
            conn.send_json(FrameType.SNAPSHOT, request)
            body = expect_reply(conn, FrameType.SCREEN, deadline_after(self.timeout))
        except UnsupportedVersion as e:
            raise snapshot_refusal(e) from None
        finally:
            conn.close()
        return screen_from(body, request)

    def commands(self, session_id: str, since: int = 0) -> CommandList:
        """The session's command records (protocol 11.3): `commands` those ended with
        seq > since, `current` the running one, and `at_prompt`, `waiting_for_input`,
        `shell`, `first_seq`."""
        return CommandList.from_payload(self._ask_v4(
            "commands()", FrameType.COMMANDS, cmds.commands_body(session_id, since),
            FrameType.COMMAND_LIST))

    def exec(self, session_id: str, command: str, timeout: float | None = 30.0, *,
             interrupt: bool = False, max_output_bytes: int | None = None) -> ExecResult:
        """Runs one command line in the session's shell as if typed, once it is at its
        prompt, and returns when it has ended (protocol 11.4): its exit code and output
        (ExecResult). At `timeout` seconds it returns state "timeout" with the command still
        running, or with interrupt=True sends Ctrl-C and returns "interrupted" once it has
        ended. A command that waits for input on the terminal returns "waiting_for_input".
        Raises NoShellIntegration for a session without shell integration, Busy while
        another exec() runs in it, SessionEnded once it has exited."""
        body = cmds.exec_body(session_id, command, timeout, interrupt)
        executed = Executed.from_payload(self._ask_v4(
            "exec()", FrameType.EXEC, body, FrameType.EXECUTED,
            cmds.exec_reply_wait(timeout, interrupt, _SLACK)))
        begin, end, truncated = executed.output_range(max_output_bytes)
        output, lost = self._read_range(session_id, begin, end)
        return ExecResult.build(executed, output, truncated or lost)

    def _read_range(self, session_id: str, begin: int, end: int) -> tuple[bytes, bool]:
        """The log's bytes [begin, end), page by page (a LOG may hold less than asked,
        9.6), and whether the log had dropped some of them."""
        out = bytearray()
        position_now, lost = begin, False
        while position_now < end:
            log = self.read(session_id, position_now,
                            min(end - position_now, cmds.OUTPUT_PAGE_BYTES))
            if log.offset > position_now:
                lost = True
            if log.offset >= end or not log.data:
                break
            out += log.data[:end - log.offset]
            position_now = log.offset + len(log.data)
        return bytes(out), lost

    def watch(self, session_id: str) -> "Watch":
        """Subscribes to the session's events (protocol 11.6): iterate over the Watch for
        Event objects as they happen (command_start, command_end, prompt, input, exit);
        the iteration ends after "exit". Events from the moment the daemon reads the
        request on; close() (or leaving a with block) unsubscribes."""
        conn = Connection(self.socket_path, protocol.COMMANDS_VERSION)
        try:
            conn.send_json(FrameType.WATCH, {"id": check_id(session_id)})
        except BaseException:
            conn.close()
            raise
        return Watch(conn)


class Watch:
    """The events of one session over a WATCH connection. `for event in watch` blocks for
    each; next_event(timeout) waits at most `timeout` seconds (TimeoutError). After the
    "exit" event, iteration stops and the connection is closed."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self.ended = False

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next event; None once the session's exit has been told."""
        if self.ended:
            return None
        try:
            frame = self._conn.next_frame(deadline_after(timeout))
        except TimeoutError:
            raise
        except BaseException:
            self.close()
            raise
        if frame is None:
            self.close()
            raise ConnectionLost("the daemon closed the watch without an exit event")
        ftype, payload = frame
        try:
            if ftype == FrameType.ERROR:
                error = error_from_payload(protocol.decode_json(ftype, payload))
                if isinstance(error, UnsupportedVersion):
                    raise cmds.commands_refusal(error, "watch()")
                raise error
            if ftype != FrameType.EVENT:
                raise ProtocolError(f"unexpected frame type {ftype} in a watch")
            event = Event.from_payload(protocol.decode_json(ftype, payload))
        except BaseException:
            self.close()
            raise
        if event.event == "exit":
            self.close()
        return event

    def __iter__(self) -> "Watch":
        return self

    def __next__(self) -> Event:
        event = self.next_event()
        if event is None:
            raise StopIteration
        return event

    def close(self) -> None:
        self.ended = True
        self._conn.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def protocol_json(body: dict) -> bytes:
    return protocol.encode_json_frame(0, body)[protocol.HEADER_SIZE:]


class Attachment:
    """An attached connection (ATTACH answered by ATTACHED). read() returns output as it
    comes; b"" once the session has ended (then .exit is set) or the attachment was
    detached. A controller may also write(), resize(), signal(), stop() and detach()."""

    def __init__(self, conn: Connection, attached: Attached, client: Client | None = None):
        self.attached = attached
        self.role = attached.role
        self._relay = Relay(conn, attached.offset)
        self._client = client or Client(conn.path)

    def snapshot(self, scrollback: int = 0, attributes: bool = False) -> Screen:
        """The session's screen (Client.snapshot), on a connection of its own: output this
        attachment has not read yet may already be drawn."""
        return self._client.snapshot(self.attached.id, scrollback, attributes)

    @property
    def offset(self) -> int:
        """The offset of the next byte read() would return."""
        return self._relay.offset - len(self._relay.pending)

    @property
    def exit(self) -> ExitStatus | None:
        return self._relay.exit

    @property
    def lost(self) -> int:
        """Bytes this reader lost to DROPPED (it fell behind the log's start)."""
        return self._relay.lost

    @property
    def ended(self) -> bool:
        return self._relay.ended and not self._relay.pending

    def read(self, timeout: float | None = None) -> bytes:
        """The output available now, waiting up to `timeout` for some; b"" at the end.
        TimeoutError when nothing came in time."""
        deadline = deadline_after(timeout)
        while not self._relay.pending and not self._relay.ended:
            if not self._relay.pump(deadline):
                raise TimeoutError("no output in time")
        self._relay.pump_available()
        if not self._relay.pending:
            self._relay.check_lost()
        return self._relay.take()

    def read_to_end(self, timeout: float | None = None) -> bytes:
        """All output until the session ends (or the attachment is detached)."""
        deadline = deadline_after(timeout)
        while not self._relay.ended:
            if not self._relay.pump(deadline):
                raise TimeoutError("the session did not end in time")
        self._relay.check_lost()
        return self._relay.take()

    def write(self, data: bytes | str) -> None:
        self._relay.send_input(data.encode() if isinstance(data, str) else bytes(data))

    def resize(self, rows: int, cols: int) -> None:
        self._relay.send_control(FrameType.RESIZE, protocol_json({"rows": rows, "cols": cols}))

    def signal(self, signal: int, target: str = "foreground") -> None:
        self._relay.send_control(FrameType.SIGNAL,
                                 protocol_json({"signal": int(signal), "target": target}))

    def stop(self) -> None:
        """Ends the session (STOP); read() then drains its last output and EXIT."""
        self._relay.send_control(FrameType.STOP)

    def detach(self, timeout: float | None = 30.0) -> int | None:
        """Leaves the session running (DETACH); returns the offset the daemon would have
        sent next, or None if the session had ended first."""
        if not self._relay.send_control(FrameType.DETACH):
            self.close()
            return None
        deadline = deadline_after(timeout)
        try:
            while not self._relay.ended:
                if not self._relay.pump(deadline):
                    raise TimeoutError("no DETACHED in time")
            self._relay.check_lost()
        finally:
            self.close()
        return self._relay.detached_offset

    def close(self) -> None:
        self._relay.conn.close()

    def __enter__(self) -> "Attachment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
