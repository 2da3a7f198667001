#!/usr/bin/env python3
"""input_waits.py [SHELL]: does EXEC tell a program that waits for input, and only that?

Prompting programs: each is started with EXEC (timeout 5 s), which must answer
`waiting_for_input`; "missed" otherwise. Latency is measured two ways, both ending when the
EXECUTED reply arrives here:
  - from the program's prompt text: a WAIT for:"text" (the prompt's pattern, from the log's end
    before the EXEC) runs beside the EXEC; its WAITED arrival is when the prompt was in the log
    (programs with no prompt text have none);
  - from `since_ms` of the WATCH "input" event of this command: the daemon's time of the
    session's last output or input before the wait began (the prompt's arrival, or the C mark
    for a program that prints nothing).
Then the program is ended (its own quit keys, then Ctrl-C / Ctrl-D) and the shell's prompt
awaited.

Computing programs (each runs about 5 s): EXEC with a 2 s timeout must answer `timeout`; then
a WAIT for:"input" of 1.5 s, while the program still runs, must time out. Either answer
otherwise is a false report. Then the command's end is awaited.

Run as the agent's account against a daemon: scripts/with-daemon.sh -- python3 THIS bash
"""
import os
import re
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

CTRL_C, CTRL_D, ESC = b"\x03", b"\x04", b"\x1b"


def prompting(shell, tmp):
    """(name, command line, prompt pattern or None, quit keys)."""
    repo = os.path.join(tmp, "repo")
    sshhome = os.path.join(tmp, "sshhome")
    text = os.path.join(tmp, "file.txt")
    return [
        # zsh's `read -p` reads from a coprocess; its prompt is `read 'x?PROMPT'`.
        ("read prompt", "read -p 'name? ' x" if shell == "bash" else "read 'x?name? '", r"name\? ", CTRL_C),
        ("python3 input()", "python3 -c \"input('name? ')\"", r"name\? ", CTRL_C),
        ("python3 getpass", "python3 -c 'import getpass; getpass.getpass()'", r"Password: ", CTRL_C),
        ("git commit (vi)", f"GIT_EDITOR=vi git -C {repo} commit", None, ESC + b":cq!\r"),
        ("apt-style Y/n", "printf 'Continue? [Y/n] '; read a", r"Continue\? \[Y/n\] ", CTRL_C),
        ("passwd", "passwd", r"(?i)password: ", CTRL_C),
        ("cat", "cat", None, CTRL_D),
        ("head -n1", "head -n1", None, CTRL_D),
        ("python3 REPL", "python3", r">>> ", CTRL_D),
        ("bc", "bc -q", None, b"quit\r"),
        ("ed", "ed", None, b"q\r"),
        ("vim", f"vim {text}", None, ESC + b":qa!\r"),
        ("less", f"less {text}", None, b"q"),
        ("ssh-keygen", f"HOME={sshhome} ssh-keygen", r"Enter file in which", CTRL_C),
        ("node REPL", "node", r"> ", CTRL_D + CTRL_D),
        ("sh -c 'read x'", "sh -c 'read x'", None, CTRL_C),
        ("dd bs=1 count=1", "dd bs=1 count=1 of=/dev/null", None, CTRL_C),
        ("python3 readline", "python3 -c 'import sys; sys.stdin.readline()'", None, CTRL_C),
        ("perl <STDIN>", "perl -e '<STDIN>'", None, CTRL_C),
        ("awk", "awk '{print; exit}'", None, CTRL_D),
        ("sort", "sort", None, CTRL_D),
        ("sed q", "sed q", None, CTRL_D),
        ("python3 select()", "python3 -c 'import select, sys; select.select([sys.stdin], [], [])'",
         None, CTRL_C),
    ]


def computing(tmp):
    make = os.path.join(tmp, "make")
    return [
        ("sleep 5", "sleep 5"),
        ("busy loop 5 s", "timeout 5 sh -c 'while :; do :; done'"),
        ("make -j2", f"make -s -j2 -C {make}"),
        ("python3 sleep", "python3 -c 'import time; time.sleep(5)'"),
        ("find / -xdev", "timeout 5 sh -c 'while :; do find / -xdev >/dev/null 2>&1; done'"),
        ("yes >/dev/null", "timeout 5 yes >/dev/null"),
    ]


def prepare(tmp):
    os.chmod(tmp, 0o755)
    with open(os.path.join(tmp, "file.txt"), "w") as f:
        f.write("".join(f"line {i}\n" for i in range(200)))
    os.mkdir(os.path.join(tmp, "sshhome"))
    make = os.path.join(tmp, "make")
    os.mkdir(make)
    with open(os.path.join(make, "Makefile"), "w") as f:
        f.write("all: a b c d\na b c d:\n\tsleep 2.5\n.PHONY: all a b c d\n")
    repo = os.path.join(tmp, "repo")
    os.mkdir(repo)
    git = f"git -C {repo}"
    os.system(f"{git} init -q && {git} config user.email bench@example.invalid && "
              f"{git} config user.name bench && echo x > {repo}/x && {git} add x")


class Watch(threading.Thread):
    """Collects the session's EVENTs with their arrival time (Unix ms)."""

    def __init__(self, sid):
        super().__init__(daemon=True)
        self.pending = wire.Pending(wire.WATCH, {"id": sid})
        self.events = []
        self.lock = threading.Lock()

    def run(self):
        try:
            while True:
                got = self.pending.next()
                if got is None:
                    return
                with self.lock:
                    self.events.append((wire.wall_ms(), got[1]))
        except (OSError, wire.ProtocolError):
            return

    def input_since(self, seq):
        """since_ms of the first "input" event after command `seq` started, or None."""
        with self.lock:
            started = False
            for _, ev in self.events:
                if ev["event"] == "command_start" and ev["command"]["seq"] == seq:
                    started = True
                elif started and ev["event"] == "input":
                    return ev.get("since_ms")
        return None


def back_to_prompt(sid, keys):
    for k in (keys, CTRL_C, CTRL_D, b"q", ESC + b":qa!\r", CTRL_C):
        wire.send(sid, k)
        if wire.wait(sid, **{"for": "prompt", "timeout_ms": 2000})["reason"] == "prompt":
            return True
    return False


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    shell = sys.argv[1] if len(sys.argv) > 1 else "bash"
    tmp = tempfile.mkdtemp(prefix="ptyvisor-input-waits.", dir="/tmp")
    prepare(tmp)
    sid = wire.start([shell], wire.session_env())
    if wire.wait(sid, **{"for": "prompt", "timeout_ms": 15000})["reason"] != "prompt":
        print("no prompt")
        return 2
    watch = Watch(sid)
    watch.start()
    print(f"# {shell}, session {sid}, load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'program':<20} {'state':<18} {'prompt→rep ms':>13} {'since→rep ms':>12} {'exec ms':>8}  note")
    missed, latencies, since_latencies, results = [], [], [], []
    for name, line, pattern, keys in prompting(shell, tmp):
        text_at = {}
        waiter = None
        if pattern:
            end = wire.log_end(sid)
            pend = wire.Pending(wire.WAIT, {"id": sid, "for": "text", "pattern": pattern,
                                            "from": end, "timeout_ms": 6000})

            def take(p=pend):
                try:
                    got = p.next()
                    if got and got[1].get("reason") == "text":
                        text_at["ms"] = wire.wall_ms()
                except wire.ProtocolError as e:
                    text_at["error"] = str(e)
                p.close()
            waiter = threading.Thread(target=take, daemon=True)
            waiter.start()
        t0 = time.monotonic()
        r = wire.exec_command(sid, line, timeout_ms=5000)
        replied = wire.wall_ms()
        exec_ms = (time.monotonic() - t0) * 1000
        if waiter:
            waiter.join(7)
        state = r["state"]
        seq = r["command"]["seq"] if r.get("command") else None
        time.sleep(0.05)  # the EVENT may trail the EXECUTED by a turn of the daemon's loop
        since = watch.input_since(seq) if seq else None
        lat = replied - text_at["ms"] if "ms" in text_at else None
        since_lat = replied - since if since else None
        note = ""
        if state != "waiting_for_input":
            missed.append(name)
            note = f"MISSED (exit {r.get('exit_code')})"
            lat = since_lat = None
        else:
            if lat is not None:
                latencies.append(lat)
            if since_lat is not None:
                since_latencies.append(since_lat)
        if "error" in text_at:
            note += " text WAIT: " + text_at["error"]
        f = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
        print(f"{name:<20} {state:<18} {f(lat):>13} {f(since_lat):>12} {exec_ms:8.0f}  {note}")
        results.append(("prompting", name, line, state, lat, since_lat, exec_ms, note))
        if state != "exited" and not back_to_prompt(sid, keys):
            print(f"  {name}: could not get back to the prompt; a new session")
            wire.kill(sid)
            sid = wire.start([shell], wire.session_env())
            wire.wait(sid, **{"for": "prompt", "timeout_ms": 15000})
            watch = Watch(sid)
            watch.start()

    false_reports = []
    print(f"\n{'program':<20} {'EXEC (2 s)':<18} {'WAIT input (1.5 s)':<18} {'exit':>4}")
    for name, line in computing(tmp):
        r = wire.exec_command(sid, line, timeout_ms=2000)
        w = {"reason": "-"}
        if r["state"] == "timeout":
            w = wire.wait(sid, **{"for": "input", "timeout_ms": 1500})
        # Only a report of input is false; a program that ended within 2 s tested nothing.
        bad = r["state"] == "waiting_for_input" or w["reason"] == "input"
        end = None
        if r.get("command"):
            done = wire.wait(sid, **{"for": "command", "after": r["command"]["seq"] - 1, "timeout_ms": 20000})
            end = (done.get("command") or {}).get("exit_code")
        if bad:
            false_reports.append(name)
        early = "" if r["state"] == "timeout" else "ENDED TOO EARLY"
        print(f"{name:<20} {r['state']:<18} {w['reason']:<18} {str(end):>4}  {'FALSE REPORT' if bad else early}")
        results.append(("computing", name, line, r["state"], w["reason"], end, bad))
        wire.wait(sid, **{"for": "prompt", "timeout_ms": 5000})
    wire.kill(sid)

    n = len(prompting(shell, tmp))
    print(f"\nprompting programs: {n}, missed: {len(missed)} {missed}")
    for label, values in (("prompt text → EXECUTED", latencies), ("since_ms → EXECUTED", since_latencies)):
        if values:
            print(f"latency {label}: n={len(values)} p50 {statistics.median(values):.0f} ms, "
                  f"p90 {pct(values, 90):.0f} ms, max {max(values):.0f} ms")
    print(f"computing programs: {len(computing(tmp))}, false reports: {len(false_reports)} {false_reports}")
    print(f"load {open('/proc/loadavg').read().split()[:3]}")
    if os.environ.get("INPUT_WAITS_MARKDOWN"):
        with open(os.environ["INPUT_WAITS_MARKDOWN"], "w") as out:
            out.write("| program | command | EXEC state | prompt text → EXECUTED (ms) | since_ms → EXECUTED (ms) | EXEC total (ms) |\n")
            out.write("| --- | --- | --- | --- | --- | --- |\n")
            for row in results:
                if row[0] != "prompting":
                    continue
                _, name, line, state, lat, since_lat, exec_ms, note = row
                fm = lambda v: "-" if v is None else f"{v:.0f}"  # noqa: E731
                cell = re.sub(r"/tmp/ptyvisor-input-waits\.[^/ ]+", "$TMP", line).replace("|", "\\|")
                out.write(f"| {name} | `{cell}` | {state} {note} | {fm(lat)} | {fm(since_lat)} | {exec_ms:.0f} |\n")
            out.write("\n| program | command | EXEC, timeout 2 s | WAIT for input, 1.5 s | exit status |\n")
            out.write("| --- | --- | --- | --- | --- |\n")
            for row in results:
                if row[0] != "computing":
                    continue
                _, name, line, state, wreason, end, bad = row
                cell = re.sub(r"/tmp/ptyvisor-input-waits\.[^/ ]+", "$TMP", line).replace("|", "\\|")
                out.write(f"| {name} | `{cell}` | {state} | {wreason} | {end} |\n")
    return 1 if missed or false_reports else 0


if __name__ == "__main__":
    sys.exit(main())
