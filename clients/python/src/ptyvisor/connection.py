"""One blocking connection to ptyvisord, and the relay of a session over it.

The socket is non-blocking underneath and every wait is a poll() with a deadline, so that a
write never blocks while output waits to be read (protocol section 7, deadlock avoidance):
frames that arrive while we write are decoded into the inbox. A connection is owned by one
object and closed exactly once (close() is idempotent).
"""

from __future__ import annotations

import collections
import errno
import os
import resource
import select
import socket
import time

from . import protocol
from .errors import ConnectionLost, ProtocolError, error_from_payload
from .protocol import FrameType

_RECV_SIZE = 1 << 18
_RECV_ROUNDS = 16          # reads per call at most: a flooding daemon cannot keep us here
_START_TIMEOUT = 30.0      # for the sendmsg that carries START and its descriptor


def deadline_after(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + max(0.0, timeout)


def _remaining_ms(deadline: float | None) -> int | None:
    if deadline is None:
        return None
    return max(0, int((deadline - time.monotonic()) * 1000 + 0.999))


def open_directory(path: str | os.PathLike | None) -> int:
    return os.open(path if path is not None else ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def send_with_fd(sock: socket.socket, data: bytes, fd: int) -> int:
    """sendmsg with one SCM_RIGHTS fd on the first byte. On ETOOMANYREFS retries once with
    the soft RLIMIT_NOFILE raised to the hard limit, then restores it (protocol 5.1)."""
    try:
        return socket.send_fds(sock, [data], [fd])
    except OSError as e:
        if e.errno != errno.ETOOMANYREFS:
            raise
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        return socket.send_fds(sock, [data], [fd])
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class Connection:
    """Frames in and out of one socket. next_frame() returns None at end of stream.
    `version` is the connection's (section 8): its frames carry it, and the daemon's may
    carry it or a lower one."""

    def __init__(self, socket_path: str | None = None, version: int = protocol.VERSION):
        self.path = socket_path or protocol.default_socket_path()
        self.version = version
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            self._sock.connect(self.path)
        except OSError:
            self._sock.close()
            raise
        self._sock.setblocking(False)
        self._poll = select.poll()
        self._poll.register(self._sock, select.POLLIN)
        self._decoder = protocol.FrameDecoder(version)
        self.inbox: collections.deque[tuple[int, bytes]] = collections.deque()
        self.at_eof = False

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        if self._sock.fileno() >= 0:
            self._sock.close()

    @property
    def closed(self) -> bool:
        return self._sock.fileno() < 0

    # -- writing -------------------------------------------------------------------------

    def send_start(self, body: dict, cwd_fd: int) -> None:
        """START with the cwd descriptor riding on its first byte."""
        data = protocol.encode_json_frame(FrameType.START, body, self.version)
        self._sock.settimeout(_START_TIMEOUT)   # a daemon that never reads cannot hang us
        try:
            sent = send_with_fd(self._sock, data, cwd_fd)
        except (BrokenPipeError, ConnectionResetError):
            sent = None
        except TimeoutError:
            self.close()
            raise
        self._sock.setblocking(False)
        try:
            if sent is None:
                self._read_to_end()
            self.write(data[sent:])
        except ConnectionLost:
            self._raise_refusal()

    def write(self, data: bytes, deadline: float | None = None) -> None:
        """Writes all of data, reading incoming frames into the inbox meanwhile."""
        view = memoryview(data)
        while view:
            try:
                n = self._sock.send(view)
                view = view[n:]
                continue
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                self._read_to_end()
            events = select.poll()
            events.register(self._sock, select.POLLOUT | (0 if self.at_eof else select.POLLIN))
            ready = events.poll(_remaining_ms(deadline))
            if not ready:
                raise TimeoutError("the daemon does not read its socket")
            if ready[0][1] & (select.POLLIN | select.POLLHUP):
                self._receive_available()

    def _read_to_end(self):
        """The daemon closed its end: reads what it sent before (the inbox keeps it), then
        raises ConnectionLost for the caller to make sense of."""
        while not self.at_eof and not self.closed:
            if not self._receive_available(block_ms=1000):
                break
        raise ConnectionLost("the daemon closed the connection")

    def _raise_refusal(self):
        """START could not be written: the daemon refused (an ERROR may wait), or went."""
        for ftype, payload in self.inbox:
            if ftype == FrameType.ERROR:
                raise error_from_payload(protocol.decode_json(ftype, payload))
        raise ConnectionLost("the daemon closed the connection")

    def send_frame(self, ftype: int, payload: bytes = b"", deadline: float | None = None) -> None:
        self.write(protocol.encode_frame(ftype, payload, self.version), deadline)

    def send_json(self, ftype: int, body: dict) -> None:
        self.write(protocol.encode_json_frame(ftype, body, self.version))

    # -- reading -------------------------------------------------------------------------

    def _receive_available(self, block_ms: int | None = 0) -> bool:
        """Reads what the socket holds (waiting up to block_ms for something) and decodes
        it into the inbox. False when nothing came."""
        if block_ms != 0 and not self._poll.poll(block_ms):
            return False
        got = False
        for _ in range(_RECV_ROUNDS):
            try:
                chunk = self._sock.recv(_RECV_SIZE)
            except BlockingIOError:
                return got
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.at_eof = True
                self._check_trailing_bytes()
                return True
            got = True
            self._decoder.feed(chunk)
            try:
                self.inbox.extend(self._decoder.frames())
            except ProtocolError:
                self.close()
                raise
            if len(chunk) < _RECV_SIZE:
                return got
        return got

    def _check_trailing_bytes(self) -> None:
        if self._decoder._buffer:
            self.close()
            raise ProtocolError("the daemon closed the connection in the middle of a frame")

    def next_frame(self, deadline: float | None = None) -> tuple[int, bytes] | None:
        """The next frame; None at end of stream; TimeoutError when the deadline passes."""
        while not self.inbox:
            if self.at_eof:
                return None
            if not self._receive_available(block_ms=_remaining_ms(deadline)):
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError("no frame from the daemon in time")
        return self.inbox.popleft()

    def poll_frames(self, deadline: float | None) -> bool:
        """Waits until at least one frame (or end of stream) is available. False on timeout."""
        while not self.inbox and not self.at_eof:
            if not self._receive_available(block_ms=_remaining_ms(deadline)):
                if deadline is not None and time.monotonic() >= deadline:
                    return False
        return True

    def drain_nonblocking(self) -> None:
        if not self.at_eof and not self.closed:
            self._receive_available()


def expect_reply(conn: Connection, reply_type: int, deadline: float | None) -> dict:
    """The JSON reply of a one-request connection, or the typed ERROR the daemon sent."""
    frame = conn.next_frame(deadline)
    if frame is None:
        raise ConnectionLost("the daemon closed the connection without a reply")
    ftype, payload = frame
    if ftype == FrameType.ERROR:
        raise error_from_payload(protocol.decode_json(ftype, payload))
    if ftype != reply_type:
        raise ProtocolError(f"expected {FrameType(reply_type).name}, got frame type {ftype}")
    return protocol.decode_json(ftype, payload)


class Relay:
    """The state of a session relayed over a connection (after STARTED or ATTACHED): output
    not consumed yet, the next offset, bytes lost to DROPPED, and how it ended (EXIT, or
    DETACHED). An ERROR is raised where it is read."""

    def __init__(self, conn: Connection, offset: int):
        self.conn = conn
        self.pending = bytearray()     # received output not yet consumed
        self.offset = offset           # the offset of the next byte the daemon sends
        self.lost = 0
        self.exit: protocol.ExitStatus | None = None
        self.detached_offset: int | None = None
        self.ended = False             # EXIT, DETACHED, or end of stream seen
        self.connection_lost = False   # end of stream without any of them
        # A connection of version 5 or later (a START with a profile speaks 6) is told when a
        # person takes the terminal (CONTROLLER) and which of its frames were not carried out
        # meanwhile (REFUSED, 12.3): neither ends the relay.
        self.controller = "agent"
        self.refused = 0

    def _handle(self, ftype: int, payload: bytes) -> None:
        if ftype == FrameType.OUTPUT:
            self.pending += payload
            self.offset += len(payload)
        elif ftype == FrameType.EXIT:
            self.exit = protocol.ExitStatus.from_payload(protocol.decode_json(ftype, payload))
            self.ended = True
        elif ftype == FrameType.DROPPED:
            body = protocol.decode_json(ftype, payload)
            self.lost += protocol.member(body, "lost", int)
            self.offset = protocol.member(body, "offset", int)
        elif ftype == FrameType.DETACHED:
            body = protocol.decode_json(ftype, payload)
            self.detached_offset = protocol.member(body, "offset", int, None)
            self.ended = True
        elif ftype == FrameType.CONTROLLER:
            body = protocol.decode_json(ftype, payload)
            self.controller = protocol.member(body, "controller", str)
        elif ftype == FrameType.REFUSED:
            body = protocol.decode_json(ftype, payload)
            self.refused += protocol.member(body, "count", int)
        elif ftype == FrameType.ERROR:
            self.ended = True
            self.conn.close()
            raise error_from_payload(protocol.decode_json(ftype, payload))
        else:
            self.conn.close()
            raise ProtocolError(f"unexpected frame type {ftype} in a session")

    def _handle_inbox(self) -> None:
        inbox = self.conn.inbox
        while inbox and not self.ended:
            try:
                self._handle(*inbox.popleft())
            except ProtocolError:
                self.ended = True
                self.conn.close()
                raise
        if not self.ended and self.conn.at_eof and not inbox:
            self.ended = self.connection_lost = True   # raised once `pending` is consumed

    def check_lost(self) -> None:
        """ConnectionLost if the stream ended without EXIT, ERROR or DETACHED."""
        if self.connection_lost:
            raise ConnectionLost("the daemon closed the connection without EXIT")

    def pump(self, deadline: float | None) -> bool:
        """Waits for the next frames until the deadline and handles them. False on timeout."""
        if self.ended:
            return True
        if not self.conn.poll_frames(deadline):
            return False
        self._handle_inbox()
        return True

    def pump_available(self) -> None:
        """Handles whatever has arrived, without waiting."""
        if not self.ended:
            self.conn.drain_nonblocking()
            self._handle_inbox()

    def take(self, size: int | None = None) -> bytes:
        if size is None or size >= len(self.pending):
            data = bytes(self.pending)
            self.pending.clear()
        else:
            data = bytes(self.pending[:size])
            del self.pending[:size]
        return data

    def send_control(self, ftype: int, payload: bytes = b"") -> bool:
        """Sends one frame of the controller. False when the session had already ended (the
        frame is then moot, as the protocol ignores frames of an ending session)."""
        if self.ended:
            return False
        try:
            self.conn.send_frame(ftype, payload)
        except ConnectionLost:
            self._handle_inbox()
            return False
        self._handle_inbox()
        return True

    def send_input(self, data: bytes) -> bool:
        for i in range(0, len(data), protocol.MAX_IO_PAYLOAD):
            if not self.send_control(FrameType.INPUT, data[i:i + protocol.MAX_IO_PAYLOAD]):
                return False
        return True
