#!/usr/bin/env python3
"""exec_latency.py [ROUNDS] [WARMUP]: what `EXEC true` costs over the shell's own round trip.

Baseline: bash (and zsh) with the same integration script, on a pty this program opens itself
(`bash --rcfile shell-integration/bash/ptyvisor.bash -i`; zsh -i with
ZDOTDIR=shell-integration/zsh): write "true\r", time until the command's D mark (its end, what
EXEC waits for) and until the next prompt's A mark; then wait for that prompt's B before the
next round.

ptyvisor: EXEC `true` in a session of the same shell started with shell integration, timed
(a) from before connect() to the EXECUTED reply (a fresh connection each time, as a client
does), and (b) from sending EXEC over a connection opened beforehand to the reply.

ROUNDS (200) timed rounds after WARMUP (20); prints p50/p90/p99 and the p50 differences, with
/proc/loadavg read right after each series.

Run as the agent's account against a daemon: scripts/with-daemon.sh -- python3 THIS
"""
import fcntl
import json
import os
import pty
import select
import struct
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK_A, MARK_B, MARK_D = b"\x1b]133;A", b"\x1b]133;B", b"\x1b]133;D"


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


class PtyShell:
    def __init__(self, shell):
        env = dict(e.split("=", 1) for e in wire.session_env(["TERM=xterm-256color"]))
        if shell == "bash":
            argv = ["bash", "--rcfile", os.path.join(ROOT, "shell-integration/bash/ptyvisor.bash"), "-i"]
        else:
            argv = ["zsh", "-i"]
            env["ZDOTDIR"] = os.path.join(ROOT, "shell-integration/zsh")
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvpe(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.buf = b""
        self.until(MARK_B, 15)

    def until(self, mark, timeout=10):
        """Reads until `mark` is in the buffer; returns the time it arrived; drops up to it."""
        deadline = time.monotonic() + timeout
        while mark not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError(f"no {mark!r} in {self.buf[-200:]!r}")
            self.buf += os.read(self.fd, 65536)
        at = time.monotonic()
        self.buf = self.buf[self.buf.index(mark) + len(mark):]
        return at

    def round(self):
        self.buf = b""
        t0 = time.monotonic()
        os.write(self.fd, b"true\r")
        t_d = self.until(MARK_D)
        t_a = self.until(MARK_A)
        self.until(MARK_B)
        return (t_d - t0) * 1000, (t_a - t0) * 1000

    def close(self):
        os.write(self.fd, b"exit\r")
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def exec_connect(sid):
    t0 = time.monotonic()
    r = wire.exec_command(sid, "true")
    assert r["state"] == "exited" and r["exit_code"] == 0, r
    return (time.monotonic() - t0) * 1000


def exec_preconnected(sid):
    s = wire.connect()
    try:
        payload = json.dumps({"id": sid, "command": "true"}).encode()
        t0 = time.monotonic()
        wire.send_frame(s, wire.EXEC, payload)
        r = wire.json_reply(s, wire.EXECUTED)
        ms = (time.monotonic() - t0) * 1000
    finally:
        s.close()
    assert r["state"] == "exited" and r["exit_code"] == 0, r
    return ms


def series(fn, rounds, warmup):
    for _ in range(warmup):
        fn()
    return [fn() for _ in range(rounds)], load()


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    warmup = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    results = []
    for shell in ("bash", "zsh"):
        sh = PtyShell(shell)
        pairs, ld = series(sh.round, rounds, warmup)
        sh.close()
        results.append((shell, "pty: write true\\r → D mark", [p[0] for p in pairs], ld))
        results.append((shell, "pty: write true\\r → next A mark", [p[1] for p in pairs], ld))
        sid = wire.start([shell], wire.session_env())
        wire.wait(sid, **{"for": "prompt", "timeout_ms": 15000})
        values, ld = series(lambda: exec_connect(sid), rounds, warmup)
        results.append((shell, "EXEC true, connect included", values, ld))
        values, ld = series(lambda: exec_preconnected(sid), rounds, warmup)
        results.append((shell, "EXEC true, connection already open", values, ld))
        wire.kill(sid)
    print(f"{rounds} rounds after {warmup} warm-up")
    print(f"{'shell':<5} {'what':<38} {'p50':>7} {'p90':>7} {'p99':>7}  load (1/5/15 min)")
    p50 = {}
    for shell, what, values, ld in results:
        p50[(shell, what)] = pct(values, 50)
        print(f"{shell:<5} {what:<38} {pct(values, 50):7.2f} {pct(values, 90):7.2f} {pct(values, 99):7.2f}  {ld}")
    print()
    diffs = []
    for shell in ("bash", "zsh"):
        for base in ("pty: write true\\r → D mark", "pty: write true\\r → next A mark"):
            for ex in ("EXEC true, connect included", "EXEC true, connection already open"):
                d = p50[(shell, ex)] - p50[(shell, base)]
                diffs.append((shell, ex, base, d))
                print(f"{shell:<5} p50({ex}) − p50({base}) = {d:+.2f} ms")
    if os.environ.get("EXEC_LATENCY_MARKDOWN"):
        with open(os.environ["EXEC_LATENCY_MARKDOWN"], "w") as out:
            out.write("| shell | what | p50 ms | p90 ms | p99 ms | load (1/5/15 min) |\n| --- | --- | --- | --- | --- | --- |\n")
            for shell, what, values, ld in results:
                out.write(f"| {shell} | {what} | {pct(values, 50):.2f} | {pct(values, 90):.2f} | {pct(values, 99):.2f} | {ld} |\n")
            out.write("\n| shell | EXEC | baseline | p50 difference ms |\n| --- | --- | --- | --- |\n")
            for shell, ex, base, d in diffs:
                out.write(f"| {shell} | {ex} | {base} | {d:+.2f} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
