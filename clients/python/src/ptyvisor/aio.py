"""The session calls of protocol versions 2, 3 and 4, for asyncio: AsyncClient mirrors Client
(and AsyncWatch mirrors Watch), each request in the version Client uses for it.

START's cwd descriptor rides on a sendmsg that asyncio's streams cannot make, so the
connection is made and START written on the bare non-blocking socket, then handed to
asyncio.open_unix_connection. Every other frame goes through the stream.
"""

from __future__ import annotations

import asyncio
import os
import socket

from . import commands as cmds
from . import protocol
from .client import (kill_body, log_from, log_length, protocol_json, screen_from,
                     send_payload, sessions_from, snapshot_refusal, start_body, wait_body)
from .commands import CommandList, Event, ExecResult, Executed
from .connection import open_directory, send_with_fd
from .errors import ConnectionLost, ProtocolError, UnsupportedVersion, error_from_payload
from .profiles import check_profile, start_refusal, start_version
from .protocol import (Attached, ExitStatus, FrameType, Killed, Log, Screen, SessionInfo,
                       Started, Waited, check_id, member, position)

_SLACK = 10.0


class _AsyncConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 version: int = protocol.VERSION):
        self.reader, self.writer = reader, writer
        self.version = version   # the connection's (section 8), as Connection's

    @classmethod
    async def open(cls, path: str, start: tuple[bytes, int] | None = None,
                   version: int = protocol.VERSION):
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, path)
            rest = b""
            if start is not None:
                data, fd = start
                sent = await cls._send_fd(loop, sock, data, fd)
                rest = data[sent:]
            reader, writer = await asyncio.open_unix_connection(sock=sock)
        except BaseException:
            sock.close()
            raise
        conn = cls(reader, writer, version)
        if rest:
            conn.writer.write(rest)
        return conn

    @staticmethod
    async def _send_fd(loop, sock, data: bytes, fd: int) -> int:
        while True:
            try:
                return send_with_fd(sock, data, fd)
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(sock, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(sock)
            except (BrokenPipeError, ConnectionResetError):
                return 0   # the daemon refused at accept: its ERROR is read next

    async def send(self, ftype: int, payload: bytes = b"") -> None:
        self.writer.write(protocol.encode_frame(ftype, payload, self.version))
        try:
            await self.writer.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass   # what the daemon sent before closing is still read

    async def next_frame(self) -> tuple[int, bytes] | None:
        try:
            header = await self.reader.readexactly(protocol.HEADER_SIZE)
        except asyncio.IncompleteReadError as e:
            if e.partial:
                raise ProtocolError("the daemon closed the connection in a frame") from None
            return None
        except ConnectionResetError:
            return None
        ftype, length = protocol.parse_header(header, self.version)
        try:
            payload = await self.reader.readexactly(length) if length else b""
        except asyncio.IncompleteReadError:
            raise ProtocolError("the daemon closed the connection in a frame") from None
        return ftype, payload

    async def reply(self, reply_type: int) -> dict:
        frame = await self.next_frame()
        if frame is None:
            raise ConnectionLost("the daemon closed the connection without a reply")
        ftype, payload = frame
        if ftype == FrameType.ERROR:
            raise error_from_payload(protocol.decode_json(ftype, payload))
        if ftype != reply_type:
            raise ProtocolError(f"expected {FrameType(reply_type).name}, got frame type {ftype}")
        return protocol.decode_json(ftype, payload)

    def close(self) -> None:
        self.writer.close()


class AsyncClient:
    """As Client, with coroutines. `timeout` bounds each reply (not wait()'s own wait)."""

    def __init__(self, socket_path: str | None = None, timeout: float | None = 30.0):
        self.socket_path = socket_path or protocol.default_socket_path()
        self.timeout = timeout

    async def _ask(self, ftype, payload, reply, timeout=-1, version=protocol.VERSION) -> dict:
        conn = await _AsyncConnection.open(self.socket_path, version=version)
        try:
            await conn.send(ftype, payload)
            return await asyncio.wait_for(conn.reply(reply),
                                          self.timeout if timeout == -1 else timeout)
        finally:
            conn.close()

    async def _ask_v4(self, call, ftype, body, reply, timeout=-1) -> dict:
        try:
            return await self._ask(ftype, protocol_json(body), reply, timeout,
                                   protocol.COMMANDS_VERSION)
        except UnsupportedVersion as e:
            raise cmds.commands_refusal(e, call) from None

    async def start(self, argv, *, cwd=None, env=None, term="xterm-256color", rows=24,
                    cols=80, shell_integration=False, profile=None) -> Started:
        check_profile(profile)
        version = start_version(shell_integration, profile)
        fd = open_directory(cwd)
        try:
            data = protocol.encode_json_frame(
                FrameType.START, start_body(argv, fd, env, term, rows, cols, True,
                                            shell_integration, profile), version)
            conn = await _AsyncConnection.open(self.socket_path, (data, fd), version)
        finally:
            os.close(fd)
        try:
            return Started.from_payload(await asyncio.wait_for(conn.reply(FrameType.STARTED),
                                                               self.timeout))
        except UnsupportedVersion as e:
            raise start_refusal(e, "start", shell_integration, profile) from None
        finally:
            conn.close()

    async def attach(self, session_id, *, role="controller", offset="tail",
                     takeover=False) -> "AsyncAttachment":
        if role not in ("controller", "observer"):
            raise ValueError("role is 'controller' or 'observer'")
        body = {"id": check_id(session_id), "from": position(offset, "tail"), "role": role}
        if takeover:
            body["takeover"] = True
        conn = await _AsyncConnection.open(self.socket_path)
        try:
            await conn.send(FrameType.ATTACH, protocol_json(body))
            head = Attached.from_payload(await asyncio.wait_for(
                conn.reply(FrameType.ATTACHED), self.timeout))
        except BaseException:
            conn.close()
            raise
        return AsyncAttachment(conn, head, self)

    async def list(self) -> list[SessionInfo]:
        return sessions_from(await self._ask(FrameType.LIST, b"", FrameType.SESSIONS))

    async def read(self, session_id, offset="start", max_bytes=None) -> Log:
        body: dict = {"id": check_id(session_id), "from": position(offset, "start")}
        if max_bytes is not None:
            body["max_bytes"] = int(max_bytes)
        conn = await _AsyncConnection.open(self.socket_path)
        try:
            await conn.send(FrameType.READ, protocol_json(body))
            return await asyncio.wait_for(self._read_log(conn), self.timeout)
        finally:
            conn.close()

    @staticmethod
    async def _read_log(conn: _AsyncConnection) -> Log:
        head = await conn.reply(FrameType.LOG)
        length = log_length(head)
        data = bytearray()
        while len(data) < length:
            frame = await conn.next_frame()
            if frame is None:
                raise ConnectionLost("the log ended early")
            ftype, payload = frame
            if ftype == FrameType.ERROR:
                raise error_from_payload(protocol.decode_json(ftype, payload))
            if ftype != FrameType.OUTPUT:
                raise ProtocolError(f"unexpected frame type {ftype} in a log")
            data += payload
        if len(data) > length:
            raise ProtocolError(f"LOG announced {length} bytes and sent more")
        return log_from(head, bytes(data))

    async def wait(self, session_id, until="exit", *, pattern=None, quiet=None, offset=None,
                   timeout: float | None = 30.0, for_=None, after=None) -> Waited:
        until = cmds.wait_condition(until, for_)
        body = wait_body(session_id, until, pattern, quiet, offset, timeout, after)
        wait_for = (timeout if timeout is not None else 86400.0) + _SLACK
        if until in cmds.WAIT_CONDITIONS:
            return Waited.from_payload(await self._ask_v4(
                f"wait(for_={until!r})", FrameType.WAIT, body, FrameType.WAITED, wait_for))
        return Waited.from_payload(await self._ask(FrameType.WAIT, protocol_json(body),
                                                   FrameType.WAITED, wait_for))

    async def kill(self, session_id, signal=None) -> Killed:
        return Killed.from_payload(await self._ask(
            FrameType.KILL, protocol_json(kill_body(session_id, signal)), FrameType.KILLED,
            None if not signal else -1))

    async def send(self, session_id, data) -> int:
        body = await self._ask(FrameType.SEND, send_payload(session_id, data), FrameType.SENT)
        return member(body, "bytes", int)

    async def snapshot(self, session_id, scrollback: int = 0,
                       attributes: bool = False) -> Screen:
        """As Client.snapshot: the session's screen, on a version 3 connection."""
        request = protocol.snapshot_body(session_id, scrollback, attributes)
        conn = await _AsyncConnection.open(self.socket_path, version=protocol.SCREEN_VERSION)
        try:
            await conn.send(FrameType.SNAPSHOT, protocol_json(request))
            body = await asyncio.wait_for(conn.reply(FrameType.SCREEN), self.timeout)
        except UnsupportedVersion as e:
            raise snapshot_refusal(e) from None
        finally:
            conn.close()
        return screen_from(body, request)

    async def commands(self, session_id, since: int = 0) -> CommandList:
        """As Client.commands (COMMANDS, version 4)."""
        return CommandList.from_payload(await self._ask_v4(
            "commands()", FrameType.COMMANDS, cmds.commands_body(session_id, since),
            FrameType.COMMAND_LIST))

    async def exec(self, session_id, command: str, timeout: float | None = 30.0, *,
                   interrupt: bool = False, max_output_bytes: int | None = None) -> ExecResult:
        """As Client.exec (EXEC, version 4, then READ for the output)."""
        body = cmds.exec_body(session_id, command, timeout, interrupt)
        executed = Executed.from_payload(await self._ask_v4(
            "exec()", FrameType.EXEC, body, FrameType.EXECUTED,
            cmds.exec_reply_wait(timeout, interrupt, _SLACK)))
        begin, end, truncated = executed.output_range(max_output_bytes)
        out = bytearray()
        position_now, lost = begin, False
        while position_now < end:
            log = await self.read(session_id, position_now,
                                  min(end - position_now, cmds.OUTPUT_PAGE_BYTES))
            if log.offset > position_now:
                lost = True
            if log.offset >= end or not log.data:
                break
            out += log.data[:end - log.offset]
            position_now = log.offset + len(log.data)
        return ExecResult.build(executed, bytes(out), truncated or lost)

    async def watch(self, session_id) -> "AsyncWatch":
        """As Client.watch: `async for event in watch` (WATCH, version 4)."""
        conn = await _AsyncConnection.open(self.socket_path,
                                           version=protocol.COMMANDS_VERSION)
        try:
            await conn.send(FrameType.WATCH, protocol_json({"id": check_id(session_id)}))
        except BaseException:
            conn.close()
            raise
        return AsyncWatch(conn)


class AsyncWatch:
    """As Watch: `async for event in watch` yields Event objects as they happen and stops
    after "exit"; close() (or leaving an async with block) unsubscribes."""

    def __init__(self, conn: _AsyncConnection):
        self._conn = conn
        self.ended = False

    async def next_event(self) -> Event | None:
        """The next event; None once the session's exit has been told."""
        if self.ended:
            return None
        try:
            frame = await self._conn.next_frame()
            if frame is None:
                raise ConnectionLost("the daemon closed the watch without an exit event")
            ftype, payload = frame
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

    def __aiter__(self):
        return self

    async def __anext__(self) -> Event:
        event = await self.next_event()
        if event is None:
            raise StopAsyncIteration
        return event

    def close(self) -> None:
        if not self.ended:
            self.ended = True
            self._conn.close()

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()


class AsyncAttachment:
    """As Attachment: `await read()` returns output as it comes, b"" at the end (then
    .exit is set, or .detached_offset after detach())."""

    def __init__(self, conn: _AsyncConnection, attached: Attached,
                 client: "AsyncClient | None" = None):
        self._conn = conn
        self._client = client
        self.attached = attached
        self.role = attached.role
        self.offset = attached.offset     # of the next byte read() returns
        self.lost = 0
        self.exit: ExitStatus | None = None
        self.detached_offset: int | None = None
        self.ended = False

    async def read(self) -> bytes:
        while not self.ended:
            frame = await self._conn.next_frame()
            if frame is None:
                self.ended = True
                raise ConnectionLost("the daemon closed the connection without EXIT")
            ftype, payload = frame
            if ftype == FrameType.OUTPUT:
                self.offset += len(payload)
                return payload
            body = protocol.decode_json(ftype, payload)
            if ftype == FrameType.EXIT:
                self.exit, self.ended = ExitStatus.from_payload(body), True
            elif ftype == FrameType.DETACHED:
                self.detached_offset, self.ended = member(body, "offset", int, None), True
            elif ftype == FrameType.DROPPED:
                self.lost += member(body, "lost", int)
                self.offset = member(body, "offset", int)
            elif ftype == FrameType.ERROR:
                self.ended = True
                raise error_from_payload(body)
            else:
                raise ProtocolError(f"unexpected frame type {ftype} in a session")
        return b""

    async def snapshot(self, scrollback: int = 0, attributes: bool = False) -> Screen:
        """The session's screen (AsyncClient.snapshot), on a connection of its own."""
        client = self._client or AsyncClient()
        return await client.snapshot(self.attached.id, scrollback, attributes)

    async def read_to_end(self) -> bytes:
        out = bytearray()
        while chunk := await self.read():
            out += chunk
        return bytes(out)

    def __aiter__(self):
        return self

    async def __anext__(self) -> bytes:
        chunk = await self.read()
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def write(self, data) -> None:
        data = data.encode() if isinstance(data, str) else bytes(data)
        for i in range(0, len(data), protocol.MAX_IO_PAYLOAD):
            await self._conn.send(FrameType.INPUT, data[i:i + protocol.MAX_IO_PAYLOAD])

    async def resize(self, rows: int, cols: int) -> None:
        await self._conn.send(FrameType.RESIZE, protocol_json({"rows": rows, "cols": cols}))

    async def signal(self, signal: int, target: str = "foreground") -> None:
        await self._conn.send(FrameType.SIGNAL,
                              protocol_json({"signal": int(signal), "target": target}))

    async def stop(self) -> None:
        await self._conn.send(FrameType.STOP)

    async def detach(self) -> int | None:
        """DETACH; reads to DETACHED (output before it is discarded) and closes."""
        await self._conn.send(FrameType.DETACH)
        try:
            while not self.ended:
                await self.read()
        finally:
            self.close()
        return self.detached_offset

    def close(self) -> None:
        self._conn.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()
