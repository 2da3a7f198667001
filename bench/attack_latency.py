#!/usr/bin/env python3
"""What one client's attack on ptyvisord does to the daemon's OTHER clients.

    bench/attack_latency.py --build DIR [--seconds S] [--only a,b,...]

DIR holds ptyvisord and ptyvisor-screen, or is a build tree (src/server/ptyvisord
with ptyvisor-screen beside it). Each attack of tests/integration/test_client_bounds.cpp
(issue 24) is mounted here for S seconds (default 5) as the test account could mount it, while
another client of the same account keeps using a session of its own. A daemon that lets one
client choose unbounded work or memory makes everybody else wait for it; this puts a number
on that wait, where the test only says pass or fail.

Phases (each on a fresh private daemon, so that an attack the daemon has not recovered from
does not spill into the next phase):
  a idle          no attack: the probe's baseline.
  b signal flood  the controller of a session of 300 processes (`sleep 600 &` 300 times) writes
                  SIGNAL frames (SIGWINCH, target "session") as fast as its socket takes them.
  c costly WAIT   a detached session printed 6,000,000 random a/b characters and exited; a
                  client sends WAIT for text `a[ab]{990}c` from "start" (timeout 600 s), a
                  pattern under which RE2's DFA gives up on this text. If a WAITED comes back
                  within the phase, the client sends the WAIT again.
  d unread READs  a detached session printed 2,000,000 bytes and exited; 200 connections each
                  send READ of the whole log (max_bytes 64 MiB) and read only the first frame
                  (its 8-byte header and payload, exactly), then hold the connection.
  e conn. flood   the daemon's RLIMIT_NOFILE is lowered (prlimit) to its open descriptors + 24,
                  counted as the test counts them (once it is asleep in epoll_wait; + 1 when
                  it has no timerfd yet), but with the probe's session open; then one process of the account opens 300 connections that never send
                  anything (handshake timeout 600 s: they are never timed out), and for the
                  rest of the phase connects and closes in a loop.

Measured per phase:
  probe p50/p99/max  round trips of an echo probe during the attack: a bound session runs
                  `stty raw -echo; exec cat` (raw mode and no tty echo: the only echo is
                  cat's, so each round trip crosses the daemon twice and the session once),
                  and its controller (a process of its own) sends a short unique token as
                  INPUT about 50 times a second, and times until the token comes back in
                  OUTPUT. A token with no echo after 10 s counts as ">=10000" ms and the probe
                  goes on. The probe never catches up: after a slow round trip the next token
                  goes at once, then 20 ms apart again. Samples are the tokens sent between
                  the attack's start and its end (the last may come back later); p50 and p99
                  are nearest-rank, so every figure is one round trip that was measured.
  RSS +MiB        ptyvisord's peak VmRSS (/proc/PID/status, sampled every 100 ms from the
                  attack's start until the probe has ended, after "served after") minus its
                  VmRSS just before the attack (after the phase's setup: its session logs
                  are in the baseline).
  served after    from when the attacker's processes have exited (asked to stop at the end of
                  the phase, killed 3 s later if they have not), the time until a new client
                  is served: root connects (retrying while the listen queue is full or the
                  connection is refused) and sends STATUS_REQUEST, until a STATUS comes back.
                  ">=30000" when none came within 30 s.

The daemon runs as a service would (a process session of its own, direct backend, screen
worker on), with user = the test account, [limits] output_log_bytes = 8388608,
admissions_per_minute = 100000, max_unauthenticated_per_peer = 4 and [timeouts]
handshake = 600. Everything the account does (START, INPUT, SIGNAL, WAIT, READ, the floods)
runs in processes of its uid and gid with no supplementary group (setpriv), which this script
starts as copies of itself (`--role`), speaking the protocol with the repository's Python
client (clients/python/src/ptyvisor, its frame codec and START body). Every wait has a
deadline; the attackers are killed when their phase ends, a daemon that does not stop on
SIGTERM within 10 s is killed, and the session processes it leaves (this script is their
subreaper) and their cgroups are killed too. Needs root.
"""
import argparse
import collections
import ctypes
import datetime
import glob
import math
import os
import pwd
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ACCOUNT = "ptyvisor-test"
PHASES = {
    "a": "idle",
    "b": "signal flood",
    "c": "costly WAIT",
    "d": "unread READs",
    "e": "connection flood",
}
PROBE_HZ = 50
ECHO_DEADLINE = 10.0       # s: a probe token with no echo by then counts as >= 10000 ms
SERVED_DEADLINE = 30.0     # s: for a new client after the attack
DAEMON_STOP_GRACE = 10.0   # s: SIGTERM, then SIGKILL
SETUP_DEADLINE = 120.0     # s: a phase's sessions printing their output and exiting
SESSION_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The account's processes run the system's python3 (root's python3 may be one it cannot reach,
# such as a pyenv shim under /root).
ROLE_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_SOURCE = os.path.join(HERE, "..", "clients", "python", "src")


def log(message):
    print(f"attack_latency: {message}", file=sys.stderr, flush=True)


# -- the account's side: raw connections over the repository's frame codec -----------------

def import_client(pylib):
    sys.path.insert(0, pylib)
    global protocol, client_mod, FrameType
    from ptyvisor import client as client_mod, protocol  # noqa: F401
    from ptyvisor.protocol import FrameType  # noqa: F401


class Wire:
    """One non-blocking connection to the daemon. Every wait takes a deadline (monotonic
    seconds); frames the daemon sends while we write are decoded, never left to block it."""

    def __init__(self, path, deadline):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        while True:
            try:
                self.sock.connect(path)
                break
            except (BlockingIOError, InterruptedError):  # EAGAIN: the listen queue is full
                if time.monotonic() >= deadline:
                    self.sock.close()
                    raise TimeoutError("the listen queue stayed full") from None
                time.sleep(0.005)
            except OSError:
                self.sock.close()
                raise
        self.decoder = protocol.FrameDecoder()
        self.inbox = collections.deque()
        self.eof = False

    def close(self):
        self.sock.close()

    def _wait(self, events, deadline):
        p = select.poll()
        p.register(self.sock, events)
        timeout = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000) + 1)
        return p.poll(timeout)

    def receive(self):
        """Reads what the socket holds now into the inbox."""
        while not self.eof:
            try:
                chunk = self.sock.recv(1 << 18)
            except BlockingIOError:
                return
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
                return
            self.decoder.feed(chunk)
            self.inbox.extend(self.decoder.frames())

    def send(self, data, deadline):
        """Writes data until all is written, the deadline passes or the daemon closes; returns
        the bytes written."""
        view, sent = memoryview(data), 0
        while sent < len(data):
            try:
                sent += self.sock.send(view[sent:])
                continue
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                self.receive()
                self.eof = True
                return sent
            ready = self._wait(select.POLLOUT | select.POLLIN, deadline)
            if not ready:
                return sent
            if ready[0][1] & (select.POLLIN | select.POLLHUP | select.POLLERR):
                self.receive()
        return sent

    def next_frame(self, deadline):
        """(type, payload); None at the end of the stream; TimeoutError at the deadline."""
        while not self.inbox:
            if self.eof:
                return None
            if not self._wait(select.POLLIN, deadline):
                raise TimeoutError("no frame in time")
            self.receive()
        return self.inbox.popleft()

    def start(self, argv, detach, deadline):
        """START (bound, or detached) with this process's working directory; returns the
        STARTED payload."""
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            body = client_mod.start_body(argv, fd, session_env(), "xterm", 24, 80, detach)
            data = protocol.encode_json_frame(FrameType.START, body)
            while True:
                try:
                    sent = socket.send_fds(self.sock, [data], [fd])
                    break
                except BlockingIOError:
                    if not self._wait(select.POLLOUT, deadline):
                        raise TimeoutError("START not taken in time") from None
        finally:
            os.close(fd)
        if self.send(data[sent:], deadline) != len(data) - sent:
            raise RuntimeError("START not written")
        return expect(self, FrameType.STARTED, deadline)


def expect(wire, ftype, deadline):
    frame = wire.next_frame(deadline)
    if frame is None:
        raise RuntimeError(f"the daemon closed the connection instead of {FrameType(ftype).name}")
    if frame[0] != ftype:
        raise RuntimeError(f"{FrameType(frame[0]).name} instead of {FrameType(ftype).name}: {frame[1][:300]!r}")
    return protocol.decode_json(*frame)


def session_env():
    return {"PATH": SESSION_PATH, "HOME": pwd.getpwuid(os.getuid()).pw_dir, "LC_ALL": "C", "TERM": "xterm"}


def read_output_until(wire, needle, deadline):
    seen = b""
    while needle not in seen:
        frame = wire.next_frame(deadline)
        if frame is None or frame[0] in (FrameType.EXIT, FrameType.ERROR):
            raise RuntimeError(f"the session ended before {needle!r}: {seen[-300:]!r} {frame!r}")
        if frame[0] == FrameType.OUTPUT:
            seen += frame[1]


def detached_session_that_exited(path, argv):
    """Starts argv detached and returns its id once it has exited."""
    deadline = time.monotonic() + SETUP_DEADLINE
    w = Wire(path, deadline)
    try:
        session = w.start(argv, True, deadline)["id"]
    finally:
        w.close()
    w = Wire(path, deadline)
    try:
        w.send(protocol.encode_json_frame(FrameType.WAIT, {
            "id": session, "for": "exit", "timeout_ms": int(SETUP_DEADLINE * 1000)}), deadline)
        waited = expect(w, FrameType.WAITED, deadline + 5)
    finally:
        w.close()
    if waited.get("reason") != "exit":
        raise RuntimeError(f"the setup session did not exit: {waited}")
    return session, waited.get("offset")


class Control:
    """The harness talks to a role through its stdin ("go", "stop"; end of file is stop too)
    and reads its stdout lines."""

    def __init__(self, hard_deadline):
        self.hard_deadline = hard_deadline
        self.pending = b""
        self.stop = False

    @staticmethod
    def say(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def _read(self, timeout):
        if self.stop:
            return
        if select.select([0], [], [], max(0.0, timeout))[0]:
            chunk = os.read(0, 4096)
            if not chunk:
                self.stop = True
            self.pending += chunk
            if b"stop" in self.pending:
                self.stop = True
        if time.monotonic() >= self.hard_deadline:
            self.stop = True

    def wait_go(self):
        while b"go" not in self.pending and not self.stop:
            self._read(1.0)

    def stopped(self, timeout=0.0):
        """True once stop was asked; waits up to `timeout` for it."""
        end = time.monotonic() + timeout
        while True:
            self._read(end - time.monotonic())
            if self.stop or time.monotonic() >= end:
                return self.stop


def role_probe(args, ctl):
    deadline = time.monotonic() + 60
    w = Wire(args.socket, deadline)
    w.start(["sh", "-c", "stty raw -echo && echo probe-ready && exec cat"], False, deadline)
    read_output_until(w, b"probe-ready", deadline)
    ctl.say("ready")
    ctl.wait_go()
    buffer, i, tick = b"", 0, time.monotonic()
    while not ctl.stop:
        token = b"<%d>" % i
        i += 1
        t0 = time.monotonic()
        echo_deadline = t0 + ECHO_DEADLINE
        found = False
        if w.send(protocol.encode_frame(FrameType.INPUT, token), echo_deadline) == len(token) + protocol.HEADER_SIZE:
            try:
                while not found:
                    frame = w.next_frame(echo_deadline)
                    if frame is None or frame[0] in (FrameType.EXIT, FrameType.ERROR):
                        ctl.say(f"error the probe's session ended: {frame!r}")
                        return
                    if frame[0] == FrameType.OUTPUT:
                        buffer += frame[1]
                        at = buffer.find(token)
                        if at >= 0:
                            found = True
                            buffer = buffer[at + len(token):]
                        else:
                            buffer = buffer[-4096:]
            except TimeoutError:
                pass
        t1 = time.monotonic()
        ctl.say(f"rtt {t0:.6f} {(t1 - t0) * 1000:.3f} {0 if found else 1}")
        tick = max(tick + 1 / PROBE_HZ, t1)
        ctl.stopped(tick - time.monotonic())
    w.close()


def role_signal_flood(args, ctl):
    deadline = time.monotonic() + 60
    w = Wire(args.socket, deadline)
    w.start(["sh", "-c", "for i in $(seq 300); do sleep 600 & done; echo ready; wait"], False, deadline)
    read_output_until(w, b"ready", deadline)
    ctl.say("ready")
    ctl.wait_go()
    frame = protocol.encode_json_frame(FrameType.SIGNAL, {"signal": int(signal.SIGWINCH), "target": "session"})
    burst = memoryview(frame * 2048)
    rest, sent = burst, 0
    while not ctl.stopped() and not w.eof:
        n = w.send(rest, time.monotonic() + 0.1)  # whatever the socket takes within 100 ms
        sent += n
        rest = rest[n:] or burst  # a frame cut by the deadline is finished first
        w.inbox.clear()  # nothing after "ready": an EXIT or ERROR shows as the end of the stream
    ctl.say(f"stat SIGNAL frames written: {sent // len(frame)}{' (the daemon closed the connection)' if w.eof else ''}")


def role_costly_wait(args, ctl):
    session, end = detached_session_that_exited(args.socket, [
        "python3", "-c", "import random, sys; sys.stdout.write(''.join(random.choices('ab', k=6000000)))"])
    ctl.say(f"ready session {session} log {end} bytes")
    ctl.wait_go()
    request = protocol.encode_json_frame(FrameType.WAIT, {
        "id": session, "for": "text", "pattern": "a[ab]{990}c", "from": "start", "timeout_ms": 600000})
    sent, answers = 0, collections.Counter()
    while not ctl.stop:
        w = Wire(args.socket, time.monotonic() + ECHO_DEADLINE)
        w.send(request, time.monotonic() + ECHO_DEADLINE)
        sent += 1
        t0 = time.monotonic()
        while not ctl.stopped(0.05):
            try:
                frame = w.next_frame(time.monotonic())
            except TimeoutError:
                continue
            if frame is None:
                answers["closed"] += 1
            elif frame[0] == FrameType.WAITED:
                body = protocol.decode_json(*frame)
                answers[f"WAITED {body.get('reason')} after {time.monotonic() - t0:.1f} s"] += 1
            else:
                body = protocol.decode_json(*frame)
                answers[f"{FrameType(frame[0]).name} {body.get('code')}"] += 1
            break
        w.close()
    got = ", ".join(f"{k} x{v}" for k, v in answers.items()) or "no answer within the phase"
    ctl.say(f"stat WAITs sent: {sent}; {got}")


def read_exactly(sock, n, deadline):
    data = b""
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except BlockingIOError:
            if not select.select([sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise TimeoutError("no frame in time") from None
            continue
        if not chunk:
            raise EOFError("closed")
        data += chunk
    return data


def role_unread_reads(args, ctl):
    session, end = detached_session_that_exited(args.socket, ["sh", "-c", "head -c 2000000 /dev/zero | tr '\\0' x"])
    ctl.say(f"ready session {session} log {end} bytes")
    ctl.wait_go()
    request = protocol.encode_json_frame(FrameType.READ, {"id": session, "from": "start", "max_bytes": 67108864})
    held, outcome = [], collections.Counter()
    for _ in range(200):
        if ctl.stopped():
            break
        deadline = time.monotonic() + ECHO_DEADLINE
        try:
            w = Wire(args.socket, deadline)
        except (TimeoutError, OSError) as e:
            outcome[f"connect failed ({type(e).__name__})"] += 1
            continue
        held.append(w)
        if w.send(request, deadline) != len(request):
            outcome["READ not written in time"] += 1
            continue
        try:  # the first frame only, byte for byte: the rest of the reply stays with the daemon
            ftype, length = protocol.parse_header(read_exactly(w.sock, protocol.HEADER_SIZE, deadline))
            body = protocol.decode_json(ftype, read_exactly(w.sock, length, deadline))
        except (TimeoutError, EOFError) as e:
            outcome[f"no first frame ({e})"] += 1
            continue
        if ftype == FrameType.LOG:
            whole = body["length"] >= body["end"] - body["offset"]
            outcome["LOG of the whole log" if whole else "LOG shortened"] += 1
        else:
            outcome[f"{FrameType(ftype).name} {body.get('code')}"] += 1
    ctl.say(f"stat {len(held)} READ connections: " + ", ".join(f"{k} x{v}" for k, v in outcome.items()))
    ctl.stopped(max(0.0, ctl.hard_deadline - time.monotonic()))
    for w in held:
        w.close()


def role_connection_flood(args, ctl):
    ctl.say("ready")
    ctl.wait_go()
    held, waits = [], 0
    path = args.socket
    while len(held) < 300 and not ctl.stopped():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        try:
            s.connect(path)
            held.append(s)
        except BlockingIOError:  # the listen queue is full: try again
            s.close()
            waits += 1
            ctl.stopped(0.001)
        except OSError as e:
            s.close()
            ctl.say(f"stat connect failed: {e}")
            ctl.stopped(0.01)
    opened_at = time.monotonic()
    cycles = full = 0
    while not ctl.stopped():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        try:
            s.connect(path)
            cycles += 1
        except BlockingIOError:
            full += 1
            ctl.stopped(0.001)
        except OSError:
            ctl.stopped(0.001)
        finally:
            s.close()
    ctl.say(f"stat {len(held)} connections held ({waits} connects found the listen queue full), "
            f"then {cycles} connect-and-close in {time.monotonic() - opened_at:.1f} s "
            f"({full} found the queue full)")
    for s in held:
        s.close()


ROLES = {
    "probe": role_probe,
    "signal-flood": role_signal_flood,
    "costly-wait": role_costly_wait,
    "unread-reads": role_unread_reads,
    "connection-flood": role_connection_flood,
}
ATTACKER = {"b": "signal-flood", "c": "costly-wait", "d": "unread-reads", "e": "connection-flood"}


def run_role(args):
    import_client(args.pylib)
    ctl = Control(time.monotonic() + args.max_seconds)
    try:
        ROLES[args.role](args, ctl)
    except Exception as e:  # reported to the harness, which decides
        Control.say(f"error {type(e).__name__}: {e}")
        sys.exit(1)


# -- the harness (root) -------------------------------------------------------------------

def binary(tree, name, subdir):
    """`name` in `tree`, or where a build tree has it (tree/src/subdir/name)."""
    for candidate in (os.path.join(tree, name), os.path.join(tree, "src", subdir, name)):
        if os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    sys.exit(f"attack_latency: no {name} in {tree}")


def ppid_of(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root):
    children = collections.defaultdict(list)
    for entry in glob.glob("/proc/[0-9]*"):
        pid = int(entry[6:])
        parent = ppid_of(pid)
        if parent is not None:
            children[parent].append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def comm_of(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""


def cpu_seconds(pid):
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, ValueError, IndexError):
        return None


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def session_cgroups(pids):
    """The cgroup v2 paths (relative) of these processes that a direct-backend daemon made."""
    found = set()
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/cgroup"):
                if line.startswith("0::") and "/ptyvisor.sessions/" in line:
                    found.add(line[3:].strip())
        except OSError:
            pass
    return found


def cgroup2_mount():
    for line in open("/proc/self/mountinfo"):
        left, _, right = line.partition(" - ")
        if right.split()[0] == "cgroup2":
            return left.split()[4]
    return None


def instance_cgroup(state_directory):
    """The cgroup (relative) a direct-backend daemon makes for the sessions of one state
    directory: ptyvisor.sessions/instance-<FNV-1a of its path> under its own cgroup (the root,
    for a daemon started from here), as src/backends/direct names it. The daemon leaves it,
    empty, when it exits."""
    h = 14695981039346656037
    for c in state_directory.encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    try:
        own = [line[3:].strip() for line in open("/proc/self/cgroup") if line.startswith("0::")][0]
    except (OSError, IndexError):
        own = "/"
    return f"{'' if own == '/' else own}/ptyvisor.sessions/instance-{h:016x}"


def kill_and_reap(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)  # ours when the daemon's end made us their reaper
        except ChildProcessError:
            pass


DAEMONS = []


class Daemon:
    def __init__(self, bindir, directory, config_text):
        self.directory = directory
        self.socket = os.path.join(directory, "d.sock")
        self.log_path = os.path.join(directory, "daemon.log")
        config = os.path.join(directory, "d.toml")
        state = os.path.join(directory, "state")
        with open(config, "w") as f:
            f.write(config_text.format(socket=self.socket, state=state))
        self.instance = instance_cgroup(state)
        with open(self.log_path, "wb") as logfile:
            self.process = subprocess.Popen(
                ["setpriv", "--pdeathsig", "TERM", "--", os.path.join(bindir, "ptyvisord"), "--config", config],
                stdin=subprocess.DEVNULL, stdout=logfile, stderr=logfile, start_new_session=True)
        self.pid = self.process.pid
        self.cgroups = set()
        self.outcome = None
        DAEMONS.append(self)
        deadline = time.monotonic() + 15
        while not (os.path.exists(self.socket) and any(comm_of(p) == "ptyvisor-screen" for p in descendants(self.pid))):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the daemon did not come up with its screen worker: {self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self):
        try:
            return open(self.log_path, errors="replace").read()[-2000:]
        except OSError:
            return ""

    def remember_cgroups(self):
        self.cgroups |= session_cgroups(descendants(self.pid))

    def stop(self):
        """SIGTERM, and SIGKILL if it has not exited within the grace; then whatever it left:
        its descendants (now ours, as subreaper) and its sessions' cgroups. Returns how the
        stop went, for the notes. Once it has gone through, later calls only return that."""
        if self.outcome:
            return self.outcome
        self.remember_cgroups()
        left = descendants(self.pid)
        how = "had exited before the stop"
        if self.process.poll() is None:
            t0 = time.monotonic()
            self.process.terminate()
            try:
                self.process.wait(timeout=DAEMON_STOP_GRACE)
                how = f"stopped by SIGTERM in {time.monotonic() - t0:.1f} s"
            except subprocess.TimeoutExpired:
                how = f"did not stop within {DAEMON_STOP_GRACE:.0f} s of SIGTERM: killed"
                self.process.kill()
                self.process.wait()
        kill_and_reap([p for p in descendants(os.getpid()) if p in left])
        mount = cgroup2_mount()
        removed = 0
        for cgroup in sorted(self.cgroups) if mount else ():
            path = mount + cgroup
            if not os.path.isdir(path):
                continue
            try:
                with open(os.path.join(path, "cgroup.kill"), "w") as f:
                    f.write("1")
            except OSError:
                pass
            for _ in range(100):
                try:
                    os.rmdir(path)
                    removed += 1
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        if removed:
            how += f"; {removed} session cgroup(s) it left were killed and removed"
        if mount:  # its instance directory, empty now (rmdir fails on a cgroup in use)
            for instance in {self.instance} | {os.path.dirname(c) for c in self.cgroups}:
                if "/ptyvisor.sessions/instance-" in instance:
                    try:
                        os.rmdir(mount + instance)
                    except FileNotFoundError:
                        pass
                    except OSError as e:
                        how += f"; its cgroup {instance} could not be removed ({e.strerror})"
        self.outcome = how
        return how


class Role:
    """A copy of this script running as the account, in a process session of its own."""

    def __init__(self, name, work, socket_path, max_seconds):
        self.name = name
        self.lines = []
        self.cond = threading.Condition()
        self.errors = open(os.path.join(work, f"{name}.stderr"), "wb")
        account = pwd.getpwnam(ACCOUNT)
        self.process = subprocess.Popen(
            ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups",
             "--pdeathsig", "KILL", "--", ROLE_PYTHON, "-I", "-B", os.path.join(work, "attack_latency.py"),
             "--role", name, "--socket", socket_path, "--pylib", os.path.join(work, "py"),
             "--max-seconds", str(max_seconds)],
            cwd=os.path.join(work, "cwd"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors,
            start_new_session=True, env={"PATH": SESSION_PATH, "LC_ALL": "C"})
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        for raw in self.process.stdout:
            with self.cond:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def wait_line(self, prefix, deadline):
        with self.cond:
            while True:
                for line in self.lines:
                    if line is None:
                        raise RuntimeError(f"{self.name} exited: {self.stderr_tail()}")
                    if line.startswith("error"):
                        raise RuntimeError(f"{self.name}: {line}")
                    if line.startswith(prefix):
                        return line
                if not self.cond.wait(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                    raise RuntimeError(f"{self.name}: no '{prefix}' within the deadline")

    def stderr_tail(self):
        self.errors.flush()
        try:
            return open(self.errors.name, errors="replace").read()[-1500:]
        except OSError:
            return ""

    def tell(self, word):
        try:
            self.process.stdin.write(word.encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def end(self, grace):
        """Asks it to stop, waits `grace` seconds, then kills its process group. Returns True
        when it stopped by itself."""
        self.tell("stop")
        try:
            self.process.wait(timeout=grace)
            by_itself = True
        except subprocess.TimeoutExpired:
            by_itself = False
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        try:
            self.process.stdin.close()
        except OSError:
            pass
        for _ in range(100):  # let the reader see the end of its output
            with self.cond:
                if self.lines and self.lines[-1] is None:
                    break
            time.sleep(0.01)
        self.errors.close()
        return by_itself

    def stats(self):
        with self.cond:
            return [line[5:] for line in self.lines if line and line.startswith("stat ")]

    def errors_seen(self):
        with self.cond:
            return [line for line in self.lines if line and line.startswith("error")]


class RssSampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = rss_kib(pid) or 0
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(0.1):
            value = rss_kib(self.pid)
            if value is not None:
                self.peak = max(self.peak, value)

    def finish(self):
        self.halt.set()
        self.join()
        return self.peak


def served_after(socket_path, deadline):
    """Milliseconds from now until root's STATUS_REQUEST is answered with STATUS; None when
    none came by the deadline. A full listen queue, a refused connect or an ERROR (a refusal)
    is retried on a new connection, 5 ms later."""
    from ptyvisor import protocol as p
    t0 = time.monotonic()
    request = p.encode_frame(p.FrameType.STATUS_REQUEST)
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        first = None
        try:
            s.connect(socket_path)
            s.setblocking(True)
            s.settimeout(max(0.001, deadline - time.monotonic()))
            s.sendall(request)
            decoder = p.FrameDecoder()
            while first is None:
                s.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                decoder.feed(chunk)
                for ftype, _ in decoder.frames():
                    first = ftype
                    break
        except OSError:  # the queue is full (EAGAIN), refused, reset, or the deadline passed
            pass
        finally:
            s.close()
        if first == p.FrameType.STATUS:
            return (time.monotonic() - t0) * 1000
        time.sleep(0.005)
    return None


def idle_fd_limit(pid):
    """The test's count, + 24: the daemon's open descriptors once it is asleep (its main
    thread in epoll_wait, its other threads, a worker once a session has started, blocked
    too), + 1 if it has no timerfd yet (it may need one). Counted on a busy daemon after 10 s."""
    deadline = time.monotonic() + 10
    epoll_calls = {232, 281, 441} if os.uname().machine == "x86_64" else {22, 441}
    while time.monotonic() < deadline:
        try:
            calls = {int(t): open(f"/proc/{pid}/task/{t}/syscall").read().split()[0] for t in os.listdir(f"/proc/{pid}/task")}
        except (OSError, IndexError, ValueError):
            break
        main = calls.get(pid, "running")
        if main.isdigit() and int(main) in epoll_calls and all(c != "running" for c in calls.values()):
            break
        time.sleep(0.001)
    fds = os.listdir(f"/proc/{pid}/fd")
    timer = False
    for fd in fds:
        try:
            timer = timer or os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[timerfd]"
        except OSError:
            pass
    return len(fds) + (0 if timer else 1) + 24


def percentile(sorted_values, q):
    """Nearest rank: a value that was measured, never an average of two."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def fmt_ms(sample):
    value, timed_out = sample
    return f">={ECHO_DEADLINE * 1000:.0f}" if timed_out else f"{value:.1f}"


CONFIG = """user = "{account}"
socket = "{{socket}}"
backend = "direct"
state_directory = "{{state}}"

[limits]
output_log_bytes = 8388608
admissions_per_minute = 100000
max_unauthenticated_per_peer = 4

[timeouts]
handshake = 600
""".format(account=ACCOUNT)


def run_phase(phase, bindir, work, seconds):
    """One phase on a daemon of its own. Returns (row cells, notes)."""
    directory = os.path.join(work, phase)
    os.mkdir(directory)
    os.chmod(directory, 0o755)
    notes = []
    roles = []
    daemon = Daemon(bindir, directory, CONFIG)
    try:
        max_seconds = seconds + SETUP_DEADLINE + 60
        probe = Role("probe", work, daemon.socket, max_seconds)
        roles.append(probe)
        attacker = None
        if phase in ATTACKER:
            attacker = Role(ATTACKER[phase], work, daemon.socket, max_seconds)
            roles.append(attacker)
        probe.wait_line("ready", time.monotonic() + 60)
        if attacker:
            ready = attacker.wait_line("ready", time.monotonic() + SETUP_DEADLINE + 30)
            if ready != "ready":
                notes.append(f"setup: {ready[6:]}")
        daemon.remember_cgroups()
        if phase == "e":
            limit = idle_fd_limit(daemon.pid)
            resource.prlimit(daemon.pid, resource.RLIMIT_NOFILE, (limit, limit))
            notes.append(f"RLIMIT_NOFILE lowered to {limit}")
        before = rss_kib(daemon.pid)
        sampler = RssSampler(daemon.pid)
        sampler.start()
        cpu_before = cpu_seconds(daemon.pid)
        t_go = time.monotonic()
        probe.tell("go")
        if attacker:
            attacker.tell("go")
        while time.monotonic() < t_go + seconds:
            time.sleep(0.05)
            if daemon.process.poll() is not None:
                notes.append(f"the daemon exited during the attack ({daemon.process.returncode})")
                break
        t_end = time.monotonic()
        cpu_after = cpu_seconds(daemon.pid)
        if cpu_before is not None and cpu_after is not None:
            notes.append(f"ptyvisord used {cpu_after - cpu_before:.1f} s of CPU during the {t_end - t_go:.1f} s attack")
        log(f"phase {phase}: attack over; waiting for a new client to be served (at most {SERVED_DEADLINE:.0f} s)")
        probe.tell("stop")
        if attacker and not attacker.end(grace=3):
            notes.append("the attacker did not stop within 3 s of being asked: killed")
        served = served_after(daemon.socket, time.monotonic() + SERVED_DEADLINE)
        if not probe.end(grace=ECHO_DEADLINE + 5):
            notes.append("the probe did not end by itself: killed")
        peak = sampler.finish()
        samples = []
        for line in probe.lines:
            if line and line.startswith("rtt "):
                _, t, ms, timed_out = line.split()
                if t_go <= float(t) <= t_end:
                    samples.append((float(ms), timed_out == "1"))
        for line in probe.errors_seen() + (attacker.errors_seen() if attacker else []):
            notes.append(line)
        if attacker:
            notes.extend(attacker.stats())
        timeouts = sum(1 for s in samples if s[1])
        notes.append(f"probe: {len(samples)} round trips in {t_end - t_go:.1f} s"
                     + (f", {timeouts} without an echo within {ECHO_DEADLINE:.0f} s" if timeouts else ""))
        daemon.remember_cgroups()
        notes.append(f"daemon {daemon.stop()}")
        ordered = sorted(samples)
        if ordered:
            cells = [fmt_ms(percentile(ordered, 0.5)), fmt_ms(percentile(ordered, 0.99)), fmt_ms(ordered[-1])]
        else:
            cells = ["-", "-", "-"]
        growth = "-" if before is None else f"{max(0, peak - before) / 1024:.1f}"
        cells.append(growth)
        cells.append(f">={SERVED_DEADLINE * 1000:.0f}" if served is None else f"{served:.1f}")
        return cells, notes
    finally:
        for role in roles:
            if role.process.poll() is None:
                role.end(grace=0)
        daemon.stop()


def describe_tree(tree, ptyvisord):
    def git(*argv):
        r = subprocess.run(["git", "-C", tree, *argv], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD")
    if commit:
        date = git("log", "-1", "--format=%cd", "--date=format:%Y-%m-%d %H:%M")
        dirty = git("status", "--porcelain", "--untracked-files=no")
        commit = f"commit {commit} of {date}" + (" (+ uncommitted changes in the worktree)" if dirty else "")
    else:
        commit = "no git commit found"
    built = datetime.datetime.fromtimestamp(os.stat(ptyvisord).st_mtime).strftime("%Y-%m-%d %H:%M")
    return f"{os.path.abspath(tree)}: {commit}; ptyvisord built {built}"


def install(tree, work):
    """Copies of the binaries, this script and the Python client where the account can read
    them (a clone in /root is mode 0700); the daemon finds its screen worker beside itself."""
    bindir = os.path.join(work, "bin")
    os.mkdir(bindir)
    for name, subdir in (("ptyvisord", "server"), ("ptyvisor-screen", "server")):
        shutil.copy2(binary(tree, name, subdir), os.path.join(bindir, name))
    shutil.copy2(os.path.abspath(__file__), os.path.join(work, "attack_latency.py"))
    shutil.copytree(os.path.join(CLIENT_SOURCE, "ptyvisor"), os.path.join(work, "py", "ptyvisor"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    os.mkdir(os.path.join(work, "cwd"))
    for root, dirs, files in os.walk(work):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            path = os.path.join(root, f)
            os.chmod(path, 0o755 if os.access(path, os.X_OK) else 0o644)
    return bindir


def on_signal(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--only", default=",".join(PHASES))
    parser.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    parser.add_argument("--pylib", help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=float, default=600, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        return run_role(args)
    if not args.build:
        parser.error("--build DIR is required")
    phases = [p.strip() for p in args.only.split(",") if p.strip()]
    if not phases or any(p not in PHASES for p in phases):
        parser.error(f"--only takes phases among {','.join(PHASES)}")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    if os.geteuid() != 0:
        sys.exit("attack_latency: needs root (it runs a daemon as root, and its clients as the test account)")
    try:
        pwd.getpwnam(ACCOUNT)
    except KeyError:
        sys.exit(f"attack_latency: no account {ACCOUNT}")
    sys.dont_write_bytecode = True  # no __pycache__ left in the repository's client
    sys.path.insert(0, CLIENT_SOURCE)
    # Sessions whose daemon was killed are reparented to us, so that we can end them.
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    ptyvisord = binary(args.build, "ptyvisord", "server")
    header = describe_tree(args.build, ptyvisord)
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="ptyvisor-attack.")
    rows, notes = [], []
    try:
        os.chmod(work, 0o755)
        bindir = install(args.build, work)
        for phase in phases:
            log(f"phase {phase} ({PHASES[phase]}), {args.seconds:g} s of attack")
            t0 = time.monotonic()
            try:
                cells, phase_notes = run_phase(phase, bindir, work, args.seconds)
            except (RuntimeError, OSError) as e:
                cells, phase_notes = ["-"] * 5, [f"phase failed: {e}"]
            rows.append([f"{phase} {PHASES[phase]}"] + cells)
            notes.append((phase, [f"phase took {time.monotonic() - t0:.0f} s"] + phase_notes))
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for daemon in DAEMONS:
            daemon.stop()
        kill_and_reap(descendants(os.getpid()))
        shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"build {header}")
    print(f"run {datetime.datetime.now():%Y-%m-%d %H:%M}, {args.seconds:g} s of attack per phase, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end; "
          f"total {time.monotonic() - started:.0f} s")
    titles = ["phase", "probe p50 ms", "p99 ms", "max ms", "RSS +MiB", "served after ms"]
    widths = [max(len(titles[i]), *(len(r[i]) for r in rows)) for i in range(len(titles))]
    print("  ".join(t.ljust(widths[0]) if i == 0 else t.rjust(widths[i]) for i, t in enumerate(titles)))
    for r in rows:
        print("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
    print("notes:")
    for phase, lines in notes:
        for line in lines:
            print(f"  {phase}: {line}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("attack_latency: interrupted; cleaned up")
