"""ptyvisor: the Python client of ptyvisord (standard library only).

- ``ptyvisor.spawn``: pexpect.spawn's core on a ptyvisor session (change the import).
- ``ptyvisor.Client`` / ``ptyvisor.AsyncClient``: the session calls of protocol version 2
  (start detached, attach, list, read, wait, kill, send), ``snapshot``, the screen of
  version 3 (a ``Screen``: lines, cursor, title, scrollback, attributes), and the
  command-aware sessions of version 4 (``start(shell_integration=True)``, ``exec``,
  ``commands``, ``watch``, ``wait(for_="command")``), and the sandbox profiles of version 6
  (``start(profile=...)``, ``spawn(..., profile=...)``; ``SessionInfo.profile`` and
  ``.usage``).
- ``ptyvisor.errors``: ``PtyvisorError`` and one subclass per protocol error code.
"""

from . import errors
from .client import Attachment, Client, Watch
from .commands import CommandList, Event, ExecResult
from .errors import EOF, TIMEOUT, ExceptionPexpect, PtyvisorError
from .protocol import (Attached, AttributeRun, CommandRecord, Cursor, ExitStatus, Killed, Log,
                       Screen, SessionInfo, Started, Usage, Waited, default_socket_path)
from .pty_spawn import run, spawn

__version__ = "0.1.0"


def __getattr__(name):
    # asyncio costs more to import than the rest of the package: only its users pay for it.
    if name in ("AsyncClient", "AsyncAttachment", "AsyncWatch"):
        from . import aio
        return getattr(aio, name)
    raise AttributeError(f"module 'ptyvisor' has no attribute {name!r}")


__all__ = ["spawn", "run", "EOF", "TIMEOUT", "ExceptionPexpect", "PtyvisorError", "errors",
           "Client", "Attachment", "AsyncClient", "AsyncAttachment", "Started", "SessionInfo",
           "Log", "Waited", "Killed", "Attached", "ExitStatus", "Screen", "Cursor", "AttributeRun",
           "default_socket_path", "Watch", "AsyncWatch", "CommandRecord", "CommandList",
           "ExecResult", "Event", "Usage"]
