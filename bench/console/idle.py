#!/usr/bin/env python3
"""What `ptyvisor web` costs while nothing happens: its peak RSS (VmHWM) with one page that
has 16 terminals open, and its CPU time (utime + stime from /proc/PID/stat) over DURATION
seconds with no page, then with that page open and every session quiet.

Standard library only. Run as the account the console serves, against a real daemon:

    scripts/with-daemon.sh -- python3 bench/console/idle.py [DURATION]

It starts 16 detached sessions that print 2000 lines and then sleep, starts
`ptyvisor web --listen 127.0.0.1:0`, and plays the page itself: one /ws/events socket and one
/ws/terminal socket per session (a minimal WebSocket client below), reading everything they
are sent. Targets (the brief): <= 30 MiB RSS; ~0 CPU with no page.
"""
import base64
import os
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time

SESSIONS = 16
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cli():
    return os.environ.get("PTYVISOR_BIN", "ptyvisor")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class WebSocket:
    """A client WebSocket (RFC 6455) over a blocking socket: handshake, then frames."""

    def __init__(self, port, path, cookie):
        self.sock = socket.create_connection(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        host = f"127.0.0.1:{port}"
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           f"Origin: http://{host}\r\nCookie: {cookie}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError(f"{path}: closed during the handshake")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise RuntimeError(f"{path}: {status.decode()}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]
        self.messages = 0
        self.bytes = 0
        self.closed = False
        self.last_text = ""

    def feed(self):
        """Reads what is there and counts whole frames; False once the server closed."""
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            self.closed = True
            return False
        self.buffer += chunk
        while len(self.buffer) >= 2:
            length = self.buffer[1] & 0x7F
            at = 2
            if length == 126:
                if len(self.buffer) < 4:
                    break
                length, at = struct.unpack(">H", self.buffer[2:4])[0], 4
            elif length == 127:
                if len(self.buffer) < 10:
                    break
                length, at = struct.unpack(">Q", self.buffer[2:10])[0], 10
            if len(self.buffer) < at + length:
                break
            self.messages += 1
            self.bytes += length
            if self.buffer[0] & 0x0F == 1:  # text: keep the last, to say why a socket closed
                self.last_text = self.buffer[at:at + min(length, 300)].decode(errors="replace")
            self.buffer = self.buffer[at + length:]
        return True


def drain(sockets, stop):
    sel = selectors.DefaultSelector()
    for ws in sockets:
        sel.register(ws.sock, selectors.EVENT_READ, ws)
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.2):
            if not key.data.feed():
                sel.unregister(key.data.sock)


def measure_cpu(pid, seconds):
    before = cpu_seconds(pid)
    time.sleep(seconds)  # the measurement is of this interval itself
    return cpu_seconds(pid) - before


def main():
    duration = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    ids = []
    for _ in range(SESSIONS):
        out = subprocess.run([cli(), "run", "--detach", "--", "sh", "-c", "seq 1 2000; exec sleep 3600"],
                             check=True, capture_output=True, text=True)
        ids.append(out.stdout.strip())
    web = subprocess.Popen([cli(), "web", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    try:
        url = web.stdout.readline().strip()
        port = int(url.split(":")[2].split("/")[0])
        token = url.split("token=")[1]
        cookie = f"ptyvisor_token={token}"
        print(f"ptyvisor web pid {web.pid}, {url.split('?')[0]}; {SESSIONS} sessions; {duration:g} s each", flush=True)
        print(f"loadavg: {open('/proc/loadavg').read().strip()}")

        rss_start = status_kib(web.pid, "VmRSS")
        idle_cpu = measure_cpu(web.pid, duration)
        print(f"no page:   cpu {idle_cpu * 1000:.0f} ms in {duration:g} s; VmRSS {rss_start / 1024:.1f} MiB")

        events = WebSocket(port, "/ws/events", cookie)
        terminals = [WebSocket(port, f"/ws/terminal?id={i}", cookie) for i in ids]
        stop = threading.Event()
        drainer = threading.Thread(target=drain, args=([events] + terminals, stop), daemon=True)
        drainer.start()
        # Let the replays arrive: wait until every terminal has had its attached message and
        # some output, and the events socket its first list.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (events.messages < 1 or any(t.bytes < 8000 for t in terminals)):
            time.sleep(0.05)
        open_cpu = measure_cpu(web.pid, duration)
        stop.set()
        drainer.join()
        hwm = status_kib(web.pid, "VmHWM")
        rss = status_kib(web.pid, "VmRSS")
        replayed = sum(t.bytes for t in terminals)
        print(f"page open: cpu {open_cpu * 1000:.0f} ms in {duration:g} s "
              f"({events.messages} events messages, {replayed} terminal bytes replayed)")
        print(f"VmHWM {hwm / 1024:.1f} MiB, VmRSS {rss / 1024:.1f} MiB with 1 page and {SESSIONS} terminals")
        closed = [t for t in terminals if t.closed]
        if closed:
            print(f"warning: {len(closed)} terminal sockets were closed by the server; the last said "
                  f"{closed[-1].last_text}", file=sys.stderr)
    finally:
        web.terminate()
        web.wait()
        for i in ids:
            subprocess.run([cli(), "kill", i], capture_output=True)


if __name__ == "__main__":
    main()
