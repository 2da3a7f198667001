"""A small raw client of the ptyvisor protocol, version 4, written from docs/protocol.md.

Standard library only, so that the measuring programs of this directory depend on nothing the
project builds but the daemon itself. One request per connection (section 9.3, 11.1): each
function below opens its own connection, except `Pending`, which sends a request and lets the
caller take the reply later (a WATCH, or a WAIT running beside an EXEC).
"""
import json
import os
import socket
import struct
import time

VERSION = 4

START, STARTED, OUTPUT, ERROR = 1, 2, 4, 9
LIST, SESSIONS, READ, LOG, WAIT, WAITED, KILL, KILLED, SEND, SENT = 16, 17, 18, 19, 20, 21, 22, 23, 24, 25
COMMANDS, COMMAND_LIST, EXEC, EXECUTED, WATCH, EVENT = 29, 30, 31, 32, 33, 34

HEADER = struct.Struct(">2sBBI")


class ProtocolError(Exception):
    """The daemon answered ERROR (its `code` and `message`), or broke framing."""

    def __init__(self, body):
        super().__init__(f"{body.get('code')}: {body.get('message')}")
        self.code = body.get("code")


def socket_path():
    return os.environ.get("PTYVISOR_SOCKET", "/run/ptyvisor/ptyvisor.sock")


def frame(ftype, payload=b""):
    return HEADER.pack(b"PV", VERSION, ftype, len(payload)) + payload


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(socket_path())
    return s


def send_frame(s, ftype, payload=b"", fds=()):
    data = frame(ftype, payload)
    sent = socket.send_fds(s, [data], list(fds)) if fds else 0
    s.sendall(data[sent:])


def frames(s):
    """Yields (type, payload) until the daemon closes; reassembles split frames."""
    buf = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            return
        buf += chunk
        while len(buf) >= 8:
            magic, _version, ftype, length = HEADER.unpack_from(buf)
            if magic != b"PV":
                raise ProtocolError({"code": "bad_frame", "message": "bad magic from the daemon"})
            if len(buf) < 8 + length:
                break
            yield ftype, buf[8:8 + length]
            buf = buf[8 + length:]


def json_reply(s, expected):
    for ftype, payload in frames(s):
        body = json.loads(payload)
        if ftype == ERROR:
            raise ProtocolError(body)
        if ftype == expected:
            return body
    raise ProtocolError({"code": "closed", "message": f"closed before frame type {expected}"})


def request(ftype, body, expected):
    s = connect()
    try:
        send_frame(s, ftype, json.dumps(body).encode())
        return json_reply(s, expected)
    finally:
        s.close()


class Pending:
    """A request sent now whose reply (or stream of replies) the caller reads later."""

    def __init__(self, ftype, body, s=None):
        self.sock = s or connect()
        send_frame(self.sock, ftype, json.dumps(body).encode())
        self._frames = frames(self.sock)

    def next(self):
        """The next JSON frame as (type, body), or None at close. Raises on ERROR."""
        for ftype, payload in self._frames:
            if ftype == OUTPUT:
                continue
            body = json.loads(payload)
            if ftype == ERROR:
                raise ProtocolError(body)
            return ftype, body
        return None

    def close(self):
        self.sock.close()


def start(argv, env, cwd=".", shell_integration=True, term="xterm-256color", rows=24, cols=80):
    """STARTs a detached session (section 5.1, 9, 11.2); returns its id."""
    fd = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        body = {"argv": argv, "env": env, "cwd_dev": st.st_dev, "cwd_ino": st.st_ino, "term": term,
                "rows": rows, "cols": cols, "detach": True, "shell_integration": shell_integration}
        s = connect()
        try:
            send_frame(s, START, json.dumps(body).encode(), [fd])
            return json_reply(s, STARTED)["id"]
        finally:
            s.close()
    finally:
        os.close(fd)


def exec_command(sid, command, timeout_ms=30000, interrupt=False):
    body = {"id": sid, "command": command, "timeout_ms": timeout_ms, "interrupt": interrupt}
    return request(EXEC, body, EXECUTED)


def wait(sid, **members):
    return request(WAIT, dict(members, id=sid), WAITED)


def commands(sid, since=0):
    return request(COMMANDS, {"id": sid, "since": since}, COMMAND_LIST)


def sessions():
    s = connect()
    try:
        send_frame(s, LIST)
        return json_reply(s, SESSIONS)["sessions"]
    finally:
        s.close()


def log_end(sid):
    for entry in sessions():
        if entry["id"] == sid:
            return entry["offset"]
    raise ProtocolError({"code": "no_such_session", "message": sid})


def send(sid, data):
    s = connect()
    try:
        send_frame(s, SEND, sid.encode() + data)
        return json_reply(s, SENT)
    finally:
        s.close()


def kill(sid):
    return request(KILL, {"id": sid}, KILLED)


def read(sid, start_offset, end_offset):
    """The log's bytes [start_offset, end_offset), over as many READs as the daemon needs."""
    out = bytearray()
    position = start_offset
    while position < end_offset:
        s = connect()
        try:
            send_frame(s, READ, json.dumps({"id": sid, "from": position,
                                            "max_bytes": end_offset - position}).encode())
            it = frames(s)
            header = None
            for ftype, payload in it:
                if ftype == ERROR:
                    raise ProtocolError(json.loads(payload))
                if ftype == LOG:
                    header = json.loads(payload)
                    break
            if header is None:
                raise ProtocolError({"code": "closed", "message": "no LOG"})
            if header["offset"] != position:
                raise ProtocolError({"code": "dropped",
                                     "message": f"log starts at {header['offset']}, wanted {position}"})
            got = b"".join(p for t, p in it if t == OUTPUT)
            if len(got) != header["length"]:
                raise ProtocolError({"code": "short", "message": f"{len(got)} of {header['length']}"})
            if not got:
                raise ProtocolError({"code": "short", "message": f"nothing at {position}"})
            out += got
            position += len(got)
        finally:
            s.close()
    return bytes(out)


def session_env(extra=()):
    """The caller's environment with LANG=C.UTF-8 replacing every LANG and LC_* variable."""
    env = [f"{k}={v}" for k, v in os.environ.items()
           if k != "LANG" and not k.startswith("LC_") and not k.startswith("PTYVISOR_")]
    return env + ["LANG=C.UTF-8"] + list(extra)


def wall_ms():
    return time.time() * 1000.0
