"""Exceptions of the ptyvisor client.

Two families:
- ``ExceptionPexpect`` with ``EOF`` and ``TIMEOUT``: what ``spawn`` raises, named and used as
  pexpect's, so that code written for pexpect catches them unchanged.
- ``PtyvisorError`` with ``.code``: an ERROR frame from the daemon (one subclass per code of
  docs/protocol.md 5.6 and 9.9), or a failure of the connection itself (``ConnectionLost``,
  ``ProtocolError``). A code this client does not know maps to ``Internal``, as the protocol
  requires.
"""

from __future__ import annotations


class ExceptionPexpect(Exception):
    """Base of the exceptions that pexpect code expects (pexpect.ExceptionPexpect)."""

    def __init__(self, value: str = ""):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return str(self.value)


class EOF(ExceptionPexpect):
    """The session's output has ended (pexpect.EOF). Also a pattern for expect()."""


class TIMEOUT(ExceptionPexpect):
    """expect() or read_nonblocking() ran out of time (pexpect.TIMEOUT). Also a pattern."""


class PtyvisorError(Exception):
    """A failure reported by, or talking to, ptyvisord. ``code`` is the protocol's code."""

    code = "internal"

    def __init__(self, message: str = "", code: str | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code


class BadFrame(PtyvisorError):
    code = "bad_frame"


class UnsupportedVersion(PtyvisorError):
    code = "unsupported_version"


class TooBig(PtyvisorError):
    code = "too_big"


class UnexpectedFrame(PtyvisorError):
    code = "unexpected_frame"


class WrongFdCount(PtyvisorError):
    code = "wrong_fd_count"


class NotADirectory(PtyvisorError):
    code = "not_a_directory"


class CwdMismatch(PtyvisorError):
    code = "cwd_mismatch"


class NotAllowed(PtyvisorError):
    code = "not_allowed"


class Busy(PtyvisorError):
    code = "busy"


class RateLimited(PtyvisorError):
    code = "rate_limited"


class Overloaded(PtyvisorError):
    code = "overloaded"


class HandshakeTimeout(PtyvisorError):
    code = "handshake_timeout"


class StartFailed(PtyvisorError, ExceptionPexpect):
    """The command could not be started. Also an ExceptionPexpect, as pexpect raises one
    when the command is not found."""

    code = "start_failed"

    def __init__(self, message: str = "", code: str | None = None):
        PtyvisorError.__init__(self, message, code)
        self.value = message

    def __str__(self) -> str:
        return PtyvisorError.__str__(self)


class Internal(PtyvisorError):
    code = "internal"


class ShuttingDown(PtyvisorError):
    code = "shutting_down"


class NoSuchSession(PtyvisorError):
    code = "no_such_session"


class SessionEnded(PtyvisorError):
    code = "session_ended"


class NoShellIntegration(PtyvisorError):
    """The session's shell reports no commands (protocol 11.4): start it with
    shell_integration=True."""

    code = "no_shell_integration"


class HeldBySupervisor(PtyvisorError):
    """A person (supervisor_group, or root) holds the session's terminal (protocol 12): input
    waits until it is handed back. Sent to protocol version 5 clients; this client, which
    speaks an older version, gets Busy instead."""

    code = "held_by_supervisor"


class ProfileNotAllowed(PtyvisorError):
    """START named a sandbox profile the configuration does not offer the agent (protocol 13)."""

    code = "profile_not_allowed"


class ProfileUnavailable(PtyvisorError):
    """The session's sandbox profile cannot be enforced on this host (protocol 13): the daemon
    refuses the session rather than run it unconfined."""

    code = "profile_unavailable"


class ConnectionLost(PtyvisorError):
    """End of stream without EXIT or ERROR: the daemon restarted or crashed (protocol 6).
    Not a code the daemon sends."""

    code = "connection_lost"


class ProtocolError(PtyvisorError):
    """The daemon sent something the protocol forbids; the connection was closed.
    Not a code the daemon sends."""

    code = "protocol_error"


ERRORS_BY_CODE: dict[str, type[PtyvisorError]] = {
    cls.code: cls
    for cls in (BadFrame, UnsupportedVersion, TooBig, UnexpectedFrame, WrongFdCount,
                NotADirectory, CwdMismatch, NotAllowed, Busy, RateLimited, Overloaded,
                HandshakeTimeout, StartFailed, Internal, ShuttingDown, NoSuchSession,
                SessionEnded, NoShellIntegration, HeldBySupervisor, ProfileNotAllowed,
                ProfileUnavailable)
}


def error_from_payload(body: dict) -> PtyvisorError:
    """The typed exception for an ERROR payload. Unknown codes are Internal (protocol 5.6),
    with .code still the code the daemon sent."""
    code = body.get("code")
    if not isinstance(code, str):
        code = "internal"
    message = body.get("message")
    if not isinstance(message, str):
        message = ""
    cls = ERRORS_BY_CODE.get(code, Internal)
    return cls(message, code)
