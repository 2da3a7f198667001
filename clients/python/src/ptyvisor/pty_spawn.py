"""pexpect's core on a ptyvisor session: `ptyvisor.spawn` behaves as `pexpect.spawn`.

The command runs on a terminal of ptyvisord in a session bound to this object's connection
(it ends when the object is closed or collected, as pexpect's child is hung up). Output is
read from the connection into a buffer that expect() searches, with pexpect's rules: the
earliest match in the buffer wins, ties go to the pattern listed first; `before` is what
preceded it, `after` the match; EOF and TIMEOUT may be listed as patterns, else they are
raised. Regular expressions are Python's, compiled with re.DOTALL as pexpect does.
"""

from __future__ import annotations

import codecs
import os
import re
import shlex
import signal as signals
import time

from . import protocol
from .connection import Connection, Relay, deadline_after, expect_reply, open_directory
from .client import Client, protocol_json, start_body
from .profiles import check_profile, start_refusal, start_version
from .errors import EOF, TIMEOUT, ExceptionPexpect, UnsupportedVersion
from .protocol import FrameType, Screen

_CONTROL_NAMES = {"@": 0, "`": 0, "[": 27, "\\": 28, "]": 29, "^": 30, "_": 31, "?": 127}


class spawn:  # noqa: N801 - pexpect's name
    """spawn(command, args=[], timeout=30, ..., cwd=None, env=None, encoding=None,
    dimensions=None): pexpect.spawn's signature; see the module's docstring.
    shell_integration=True (not pexpect's) starts bash or zsh with the daemon's shell
    integration, so that Client(...).commands(child.id) and wait(child.id, for_="command")
    know its commands (protocol 11.2). profile="NAME" (not pexpect's) runs it under that
    sandbox profile (protocol 13): the connection then speaks version 6, and exit_reason
    may be "runtime-limit", "idle-timeout" or "oom-kill"."""

    def __init__(self, command, args=None, timeout=30, maxread=2000, searchwindowsize=None,
                 logfile=None, cwd=None, env=None, ignore_sighup=False, echo=True,
                 preexec_fn=None, encoding=None, codec_errors="strict", dimensions=None,
                 use_poll=False, socket_path=None, shell_integration=False, profile=None):
        if not echo:
            raise ExceptionPexpect("ptyvisor.spawn: echo=False is not supported")
        if preexec_fn is not None:
            raise ExceptionPexpect("ptyvisor.spawn: preexec_fn cannot run in the session")
        self.timeout = timeout
        self.maxread = maxread
        self.searchwindowsize = searchwindowsize
        self.logfile = logfile
        self.logfile_read = None
        self.logfile_send = None
        self.delaybeforesend = None
        self.delayafterclose = 0.0
        self.delayafterterminate = 0.0
        self.ignorecase = False
        self.encoding = encoding
        self.codec_errors = codec_errors
        self.string_type = bytes if encoding is None else str
        self.crlf = self._from_text("\r\n")
        self.linesep = self._from_text(os.linesep)
        self.buffer = self.string_type()
        self.before = None
        self.after = None
        self.match = None
        self.match_index = None
        self.exitstatus = None
        self.signalstatus = None
        self.status = None
        self.terminated = False
        self.closed = True
        self.child_fd = -1
        self._decoder = (codecs.getincrementaldecoder(encoding)(codec_errors)
                         if encoding is not None else None)
        self.args = self._argv(command, args)
        self.command = self.args[0]
        self.name = "<" + " ".join(self.args) + ">"
        rows, cols = dimensions if dimensions is not None else (24, 80)
        self._winsize = (rows, cols)
        self.profile = check_profile(profile)
        self._start(cwd, env, rows, cols, socket_path, shell_integration, profile)

    # -- starting ------------------------------------------------------------------------

    @staticmethod
    def _argv(command, args) -> list[str]:
        if args:
            return [command] + list(args)
        argv = shlex.split(command)
        if not argv:
            raise ExceptionPexpect("The command was not found or was not executable: ''")
        return argv

    def _start(self, cwd, env, rows, cols, socket_path, shell_integration=False,
               profile=None) -> None:
        env = dict(os.environ) if env is None else dict(env)
        conn = Connection(socket_path, start_version(shell_integration, profile))
        try:
            fd = open_directory(cwd)
            try:
                body = start_body(self.args, fd, env, env.get("TERM") or "dumb", rows, cols,
                                  False, shell_integration, profile)
                conn.send_start(body, fd)
            finally:
                os.close(fd)
            started = protocol.Started.from_payload(
                expect_reply(conn, FrameType.STARTED, deadline_after(30.0)))
        except UnsupportedVersion as e:
            conn.close()
            raise start_refusal(e, "spawn", shell_integration, profile) from None
        except BaseException:
            conn.close()
            raise
        self.pid = started.pid or None
        self.id = started.id
        self.unit = started.unit
        self._relay = Relay(conn, 0)
        self.child_fd = conn.fileno()
        self.closed = False

    # -- conversions ---------------------------------------------------------------------

    def _from_text(self, s: str):
        return s.encode() if self.string_type is bytes else s

    def _to_bytes(self, s: bytes | str) -> bytes:
        if isinstance(s, bytes):
            return s
        return s.encode(self.encoding or "utf-8")

    def _decode(self, data: bytes, final: bool = False):
        if self._decoder is None:
            return data
        return self._decoder.decode(data, final)

    def _log(self, data, direction: str) -> None:
        second = self.logfile_read if direction == "r" else self.logfile_send
        for f in (self.logfile, second):
            if f is not None:
                f.write(data)
                f.flush()

    # -- reading -------------------------------------------------------------------------

    def _timeout(self, timeout):
        return self.timeout if timeout == -1 else timeout

    def read_nonblocking(self, size: int = 1, timeout=-1):
        """Up to `size` bytes (characters with an encoding) of output, waiting up to
        `timeout` for some. Raises TIMEOUT, or EOF once the output has ended."""
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        deadline = deadline_after(self._timeout(timeout))
        relay = self._relay
        while True:
            if not relay.pending:
                relay.pump_available()
            if relay.pending:
                data = self._decode(relay.take(size))
                if data:
                    self._log(data, "r")
                    return data
                continue
            if relay.ended:
                tail = self._decode(b"", True)
                if tail:
                    return tail
                relay.check_lost()
                self._note_exit()
                raise EOF("End Of File (EOF). Exception style platform.")
            if not relay.pump(deadline):
                raise TIMEOUT("Timeout exceeded.")

    def expect(self, pattern, timeout=-1, searchwindowsize=-1, async_=False, **kw):
        """Index of the pattern (of a list: regexes, EOF, TIMEOUT) that matched first."""
        return self.expect_list(self.compile_pattern_list(pattern), timeout, searchwindowsize,
                                async_)

    def compile_pattern_list(self, patterns) -> list:
        if patterns is None:
            return []
        if not isinstance(patterns, list):
            patterns = [patterns]
        flags = re.DOTALL | (re.IGNORECASE if self.ignorecase else 0)
        compiled = []
        for p in patterns:
            if p is EOF or p is TIMEOUT:
                compiled.append(p)
            elif isinstance(p, (str, bytes)):
                compiled.append(re.compile(self._pattern_type(p), flags))
            elif isinstance(p, type(EOF)) and issubclass(p, (EOF, TIMEOUT)):
                compiled.append(EOF if issubclass(p, EOF) else TIMEOUT)
            elif isinstance(p, re.Pattern):
                compiled.append(p)
            else:
                raise TypeError(f"Unsupported pattern type: {type(p)}")
        return compiled

    def _pattern_type(self, p):
        if self.string_type is bytes:
            return p if isinstance(p, bytes) else p.encode()
        return p if isinstance(p, str) else p.decode(self.encoding)

    def expect_list(self, pattern_list, timeout=-1, searchwindowsize=-1, async_=False, **kw):
        return self._expect(_RegexSearcher(pattern_list), timeout, searchwindowsize, async_)

    def expect_exact(self, pattern_list, timeout=-1, searchwindowsize=-1, async_=False, **kw):
        """As expect(), with plain strings instead of regular expressions."""
        if not isinstance(pattern_list, list) or isinstance(pattern_list, (str, bytes)):
            pattern_list = [pattern_list]
        patterns = [p if p is EOF or p is TIMEOUT else self._pattern_type(p)
                    for p in pattern_list]
        return self._expect(_ExactSearcher(patterns), timeout, searchwindowsize, async_)

    def _expect(self, searcher, timeout, searchwindowsize, async_=False):
        if async_:
            raise ExceptionPexpect("ptyvisor.spawn: expect(async_=True) is not supported; "
                                   "use ptyvisor.AsyncClient")
        deadline = deadline_after(self._timeout(timeout))
        window = self.searchwindowsize if searchwindowsize == -1 else searchwindowsize
        while True:
            found = searcher.search(self.buffer, window)
            if found is not None:
                index, start, end, match = found
                self.before = self.buffer[:start]
                self.after = self.buffer[start:end]
                self.buffer = self.buffer[end:]
                self.match, self.match_index = match, index
                return index
            try:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                self.buffer += self.read_nonblocking(max(self.maxread, 1 << 16), remaining)
            except EOF as e:
                return self._end_of_expect(searcher.eof_index, EOF, e, clear=True)
            except TIMEOUT as e:
                return self._end_of_expect(searcher.timeout_index, TIMEOUT, e, clear=False)

    def _end_of_expect(self, index, kind, error, clear):
        self.before = self.buffer
        self.after = kind
        if clear:
            self.buffer = self.string_type()
        if index is None:
            self.match = self.match_index = None
            raise kind(f"{error}\n{self!r}") from None
        self.match, self.match_index = kind, index
        return index

    def read(self, size: int = -1):
        """Up to size bytes, or everything until EOF when size < 0."""
        if size == 0:
            return self.string_type()
        if size < 0:
            self.expect(EOF, timeout=None)
            return self.before
        while len(self.buffer) < size:
            try:
                self.buffer += self.read_nonblocking(size - len(self.buffer), None)
            except EOF:
                break
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def readline(self, size: int = -1):
        """One line, ending with \\r\\n as a terminal writes it; "" at EOF."""
        if size == 0:
            return self.string_type()
        index = self.expect([self.crlf, EOF], timeout=None)
        return self.before + self.crlf if index == 0 else self.before

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    # -- writing -------------------------------------------------------------------------

    def send(self, s) -> int:
        """Writes s to the terminal; returns the number of bytes written."""
        if self.delaybeforesend:
            time.sleep(self.delaybeforesend)
        data = self._to_bytes(s)
        self._log(s, "w")
        if data:
            self._relay.send_input(data)
        return len(data)

    def sendline(self, s="") -> int:
        return self.send(self._to_bytes(s) + os.linesep.encode())

    def write(self, s) -> None:
        self.send(s)

    def writelines(self, sequence) -> None:
        for s in sequence:
            self.write(s)

    def sendcontrol(self, char: str) -> int:
        """Sends Ctrl-char (sendcontrol('c') sends 0x03)."""
        char = char.lower()
        if "a" <= char <= "z":
            return self.send(bytes([ord(char) - ord("a") + 1]))
        if char in _CONTROL_NAMES:
            return self.send(bytes([_CONTROL_NAMES[char]]))
        return 0

    def sendeof(self) -> None:
        """Sends the terminal's EOF character (^D), as pexpect does."""
        self.send(b"\x04")

    def sendintr(self) -> None:
        self.send(b"\x03")

    # -- the screen ----------------------------------------------------------------------

    def snapshot(self, scrollback: int = 0, attributes: bool = False) -> Screen:
        """What the child's terminal shows now (Client.snapshot), for what pexpect users
        feed to pyte: `child.snapshot().lines`, `.cursor`, `.text()`. It covers at least
        all the output expect() has seen, and may show output not read yet."""
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        return Client(self._relay.conn.path).snapshot(self.id, scrollback, attributes)

    # -- the child -----------------------------------------------------------------------

    def _note_exit(self) -> None:
        exit = self._relay.exit
        if exit is None or self.terminated:
            return
        self.terminated = True
        if exit.status == "exited":
            self.exitstatus, self.signalstatus = exit.code, None
            self.status = (exit.code or 0) << 8
        elif exit.status == "signaled":
            self.exitstatus, self.signalstatus = None, exit.signal
            self.status = exit.signal
        else:
            self.exitstatus, self.signalstatus, self.status = None, None, None
        self.exit_reason = exit.reason

    def isalive(self) -> bool:
        """True while the session runs. Reads what has arrived (into the buffer of
        read_nonblocking) to see an EXIT, as pexpect's isalive reaps the child."""
        if self.terminated:
            return False
        if not self.closed:
            self._relay.pump_available()
            if self._relay.ended:
                self._note_exit()
                self.terminated = True
                return False
        return not self.terminated

    def wait(self):
        """Waits for the session to end and returns exitstatus (None if signaled). Output
        that arrives meanwhile stays readable."""
        if self.closed and not self.terminated:
            raise ExceptionPexpect("Cannot wait for a closed session.")
        while not self._relay.ended:
            self._relay.pump(None)
        self._relay.check_lost()
        self._note_exit()
        self.terminated = True
        return self.exitstatus

    def kill(self, sig: int) -> None:
        """Sends sig to every process of the session (SIGNAL, target "session")."""
        if not self.closed and not self._relay.ended:
            self._relay.send_control(FrameType.SIGNAL,
                                     protocol_json({"signal": int(sig), "target": "session"}))

    def terminate(self, force: bool = False) -> bool:
        """Stops the session (STOP: SIGHUP-like end of the unit), and waits for it to end."""
        if not self.isalive():
            return True
        for sig in (signals.SIGHUP, signals.SIGCONT, signals.SIGINT):
            self.kill(sig)
        if not force:
            deadline = deadline_after(0.1)
            while not self._relay.ended and self._relay.pump(deadline):
                pass
            if self._relay.ended:
                self._note_exit()
                return True
        self._relay.send_control(FrameType.STOP)
        while not self._relay.ended:
            self._relay.pump(None)
        self._relay.pending.clear()
        self._note_exit()
        self.terminated = True
        return True

    def close(self, force: bool = True) -> None:
        """Ends the session if it still runs and closes the connection; sets exitstatus or
        signalstatus."""
        if self.closed:
            return
        if not self._relay.ended:
            self._relay.send_control(FrameType.STOP)
            while not self._relay.ended:
                self._relay.pump(None)
        self._note_exit()
        self.terminated = True
        self._relay.conn.close()
        self.child_fd = -1
        self.closed = True

    def setwinsize(self, rows: int, cols: int) -> None:
        self._winsize = (rows, cols)
        self._relay.send_control(FrameType.RESIZE, protocol_json({"rows": rows, "cols": cols}))

    def getwinsize(self) -> tuple[int, int]:
        return self._winsize

    def fileno(self) -> int:
        return self.child_fd

    def isatty(self) -> bool:
        return not self.closed

    def flush(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        relay = getattr(self, "_relay", None)
        if relay is not None and not self.closed:
            relay.conn.close()

    def __repr__(self) -> str:
        return (f"<ptyvisor.spawn {self.name} id={getattr(self, 'id', None)} "
                f"buffer={self.buffer[-100:]!r} before={str(self.before)[-100:]!r}>")

    __str__ = __repr__


class _RegexSearcher:
    """pexpect's rule: the match that starts earliest in the buffer; ties to the first
    pattern listed."""

    def __init__(self, patterns):
        self.eof_index = self.timeout_index = None
        self.regexes = []
        for i, p in enumerate(patterns):
            if p is EOF:
                self.eof_index = i if self.eof_index is None else self.eof_index
            elif p is TIMEOUT:
                self.timeout_index = i if self.timeout_index is None else self.timeout_index
            else:
                self.regexes.append((i, p))

    def search(self, buffer, window):
        offset = 0
        if window:
            offset = max(0, len(buffer) - window)
        best = None
        for i, regex in self.regexes:
            m = regex.search(buffer, offset)
            if m is not None and (best is None or m.start() < best[1]):
                best = (i, m.start(), m.end(), m)
        return best


class _ExactSearcher(_RegexSearcher):
    def __init__(self, patterns):
        super().__init__(patterns)
        self.strings = self.regexes

    def search(self, buffer, window):
        best = None
        offset = max(0, len(buffer) - window) if window else 0
        for i, s in self.strings:
            at = buffer.find(s, offset)
            if at >= 0 and (best is None or at < best[1]):
                best = (i, at, at + len(s), s)
        return best


def run(command, timeout=30, withexitstatus=False, events=None, extra_args=None, logfile=None,
        cwd=None, env=None, **kwargs):
    """pexpect.run: runs command to its end and returns its output (with withexitstatus, a
    tuple of output and exit status). `events` maps patterns to answers: a string to send,
    or a function taking a dict (child, event_count, extra_args, child_result_list) that
    returns a string to send, or True to stop. A timeout ends the run, with what came."""
    child = spawn(command, timeout=30 if timeout == -1 else timeout, logfile=logfile, cwd=cwd,
                  env=env, **kwargs)
    pairs = list(events.items()) if isinstance(events, dict) else list(events or [])
    patterns = [pattern for pattern, _ in pairs]
    child_result_list = []
    event_count = 0
    try:
        while True:
            try:
                index = child.expect(patterns)
            except (EOF, TIMEOUT):
                child_result_list.append(child.before)
                break
            # A match sets both to slices of one buffer: one type, never None.
            child_result_list.append(child.before + child.after)  # type: ignore[operator]
            if not _answer(child, pairs[index][1], {
                    "child": child, "event_count": event_count, "extra_args": extra_args,
                    "child_result_list": child_result_list}):
                break
            event_count += 1
    finally:
        child.close()
    output = child.string_type().join(child_result_list)
    return (output, child.exitstatus) if withexitstatus else output


def _answer(child, response, context) -> bool:
    """Sends an event's answer; False when a callback asked to stop."""
    if isinstance(response, (str, bytes)):
        child.send(response)
        return True
    if callable(response):
        result = response(context)
        if isinstance(result, (str, bytes)):
            child.send(result)
            return True
        return not result
    raise TypeError("an event's answer is a string or a callable")
