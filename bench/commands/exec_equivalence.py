#!/usr/bin/env python3
"""exec_equivalence.py SHELL: does EXEC in a SHELL session give what `sh -c` gives?

Runs thirty-odd command lines with EXEC, one after the other in one session of SHELL (bash or
zsh, started with shell integration, LANG=C.UTF-8), and compares each with
subprocess.run(["sh", "-c", LINE]): the exit status, and the output, READ over
[output_start, output_end) with \r\n turned into \n, against sh's stdout and stderr merged (a
terminal merges them). A line whose meaning depends on the session's state (cd, export, PS1)
is compared with a `sh -c` script of the same sequence (the "reference" column says which).
Exits 1 when a row differs in a way the table does not explain.

Run as the agent's account against a daemon: scripts/with-daemon.sh -- python3 THIS bash
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402


def rows(shell, script):
    """(line, reference script or None for the line itself, kind, note)."""
    prompt = "PS1='new> '" if shell == "bash" else "PROMPT='new> '"
    return [
        ("true", None, "plain", ""),
        ("false", None, "plain", ""),
        ("(exit 7)", None, "plain", ""),
        (script, None, "plain", "a failing test script"),
        ("printf abc", None, "plain", "no final newline"),
        ("head -c 1048576 /dev/zero | tr '\\0' x", None, "plain", "1 MiB"),
        ("cd /tmp", None, "state", ""),
        ("pwd", "cd /tmp; pwd", "state", "after cd /tmp"),
        ('read -r x; echo "got $x"', None, "input", "SEND hello\\r"),
        ("sleep 100", None, "interrupt", "Ctrl-C at 1 s"),
        ("echo 'héllo wörld ✓ 日本'", None, "plain", "unicode"),
        (prompt, None, "state", "prompt changed"),
        ("printf 'a\\tb\\n'", None, "plain", "after the prompt change"),
        ("echo one two three | tr a-z A-Z | wc -w", None, "plain", "pipeline"),
        ("ls /nonexistent", None, "plain", "stderr"),
        ("(cd / && pwd)", None, "plain", "subshell"),
        ("pwd", "cd /tmp; (cd / && pwd) >/dev/null; pwd", "state", "the subshell's cd stayed inside"),
        ("true && false", None, "plain", ""),
        ("seq 1 1000", None, "plain", ""),
        ("export A=1", None, "state", ""),
        ("echo $A", "export A=1; echo $A", "state", "after export"),
        ("cat <<< 'here string'", None, "shell", "dash has no here-string"),
        ("printf '%5000s\\n' x", None, "plain", "a 5001-byte line"),
        ("printf '\\033[31mred\\033[0m\\n'", None, "plain", "ANSI colours"),
        ("yes | head -n 3", None, "plain", "SIGPIPE"),
        ("cat /etc/hostname", None, "plain", ""),
        ("test -d /tmp", None, "plain", ""),
        ("[ 1 = 2 ]", None, "plain", ""),
        ("ls /nonexistent 2>/dev/null", None, "state", ""),
        ("echo $?", "ls /nonexistent 2>/dev/null; echo $?", "state", "status of the line before"),
        ("echo out; echo err >&2", None, "plain", "stdout then stderr"),
        ("sh -c 'kill -TERM $$'", None, "plain", "killed by a signal"),
        ("echo \"$A\" \"$PWD\"", "export A=1; cd /tmp; echo \"$A\" \"$PWD\"", "state",
         "state after 31 commands"),
    ]


def reference(shell, line, script, kind, env):
    """(status, merged output) of the line run outside ptyvisor."""
    argv = [shell if kind == "shell" else "sh", "-c", script or line]
    if kind == "interrupt":
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        time.sleep(0.5)
        os.killpg(p.pid, signal.SIGINT)  # what the terminal's Ctrl-C does: the whole group
        out, _ = p.communicate()
        status = p.returncode
    else:
        stdin = b"hello\n" if kind == "input" else b""
        p = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        out, status = p.stdout, p.returncode
    if status < 0:
        status = 128 - status  # a shell reports death by signal N as 128+N
    return status, out


def run_exec(sid, line, kind):
    """(state, status, output with \\r\\n -> \\n, raw output, milliseconds)."""
    t0 = time.monotonic()
    if kind == "interrupt":
        r = wire.exec_command(sid, line, timeout_ms=1000, interrupt=True)
    else:
        r = wire.exec_command(sid, line, timeout_ms=30000)
    state, record = r["state"], r["command"]
    late = None
    if kind != "input" and state == "waiting_for_input":
        # A false report: the record is taken from the command's real end so that the table
        # still shows its status and output; the row stays a mismatch.
        w = wire.wait(sid, **{"for": "command", "after": record["seq"] - 1, "timeout_ms": 10000})
        record = w.get("command")
        late = record.get("exit_code") if record else None
    if kind == "input" and state == "waiting_for_input":
        wire.send(sid, b"hello\r")
        w = wire.wait(sid, **{"for": "command", "after": record["seq"] - 1, "timeout_ms": 10000})
        record = w.get("command")
        state = "waited:" + w["reason"]
    ms = (time.monotonic() - t0) * 1000
    status = record.get("exit_code") if record else None
    if late is not None:
        status = None  # EXEC itself gave no status
    raw = b""
    if record and record.get("output_end") is not None:
        raw = wire.read(sid, record["output_start"], record["output_end"])
    return state, status, raw.replace(b"\r\n", b"\n"), raw, ms


def explain(kind, shell, out, ref_out, line):
    """Why a differing output is still right, or None."""
    if kind == "input" and out == b"hello\n" + ref_out:
        return "the terminal echoes the typed line"
    if kind == "interrupt" and out == b"^C" + ref_out:
        return "the terminal echoes ^C"
    if kind == "interrupt" and out == b"^C\n" + ref_out:
        return "the terminal echoes ^C, the shell ends the line"
    if shell == "zsh" and kind == "plain" and ref_out == b"Terminated\n" and \
            out == f"zsh: terminated  {line}\n".encode():
        return "the shell's own report of a death by SIGTERM, worded by zsh"
    return None


def main():
    shell = sys.argv[1] if len(sys.argv) > 1 else "bash"
    env_list = wire.session_env()
    env = dict(e.split("=", 1) for e in env_list)
    tmp = tempfile.mkdtemp(prefix="ptyvisor-equivalence.", dir="/tmp")
    os.chmod(tmp, 0o755)
    script = os.path.join(tmp, "failing-test.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho 'test_parse: expected 3, got 4'\necho FAILED >&2\nexit 1\n")
    os.chmod(script, 0o755)

    sid = wire.start([shell], env_list)
    w = wire.wait(sid, **{"for": "prompt", "timeout_ms": 15000})
    if w["reason"] != "prompt":
        print(f"{shell}: no prompt: {w}")
        return 2
    print(f"# {shell}, session {sid}, load {open('/proc/loadavg').read().split()[:3]}")
    header = f"{'#':>2} {'command':<44} {'ref':<6} {'sh':>3} {'exec':>4} {'state':<18} {'out':<5} {'ms':>7}  note"
    print(header)
    print("-" * len(header))
    failures, explained = [], []
    table = []
    for n, (line, ref_script, kind, note) in enumerate(rows(shell, script), 1):
        ref_status, ref_out = reference(shell, line, ref_script, kind, env)
        state, status, out, raw, ms = run_exec(sid, line, kind)
        same_out = out == ref_out
        why = None if same_out else explain(kind, shell, out, ref_out, line)
        ok = status == ref_status and (same_out or why)
        ref_name = {"shell": f"{shell}-c", "state": "seq"}.get(kind, "sh-c")
        verdict = "yes" if same_out else ("expl" if why else "NO")
        shown = line if len(line) <= 44 else line[:41] + "..."
        note = "; ".join(x for x in (note, why) if x)
        print(f"{n:>2} {shown:<44} {ref_name:<6} {ref_status:>3} {str(status):>4} {state:<18} {verdict:<5} {ms:7.1f}  {note}")
        table.append((n, line, ref_name, ref_status, status, state, verdict, ms, note))
        if why:
            explained.append(n)
        if not ok:
            failures.append((n, line, ref_status, status, ref_out[:200], out[:200], raw[:200]))
    wire.kill(sid)
    total = len(table)
    agree = total - len(failures)
    print(f"\n{agree}/{total} agree ({len(explained)} with an explained output difference), "
          f"{len(failures)} mismatch(es); load {open('/proc/loadavg').read().split()[:3]}")
    for n, line, rs, es, ro, eo, raw in failures:
        print(f"MISMATCH {n} {line!r}: sh status {rs} exec status {es}\n  sh:   {ro!r}\n  exec: {eo!r}\n  raw:  {raw!r}")
    if os.environ.get("EQUIVALENCE_MARKDOWN"):
        with open(os.environ["EQUIVALENCE_MARKDOWN"], "w") as f:
            f.write("| # | command | reference | sh status | EXEC status | EXEC state | output equal | ms | note |\n")
            f.write("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
            for n, line, ref_name, rs, es, state, verdict, ms, note in table:
                cell = line.replace("|", "\\|")
                if len(cell) > 60:
                    cell = cell[:57] + "..."
                f.write(f"| {n} | `{cell}` | {ref_name} | {rs} | {es} | {state} | {verdict} | {ms:.0f} | {note} |\n")
            f.write(f"\n{agree}/{total} agree, {len(failures)} mismatch(es).\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
