#!/usr/bin/env python3
"""marks_test.py bash|zsh SCRIPTS_DIR - the shell integration scripts, tested on the raw bytes.

Starts the shell in a pseudo-terminal the way the daemon does (src/server/shell_integration.h),
with a temporary HOME holding startup files of the user's own, types commands and checks each
command's bytes: prompt marks (OSC 133;A, B), the echo of the typed line, OSC 133;C with the exact
command line, the command's output, OSC 133;D with its status, OSC 7 with the directory.
The output between C and D must be what `sh -c COMMAND` prints.
Exit status: 0 passed, 1 failed, 77 the shell is not installed (CTest's SKIP_RETURN_CODE).
Nothing waits for a time: each step reads until the bytes it expects arrive; TIMEOUT only bounds
a step that fails.
"""

import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

TIMEOUT = 10.0
SKIP = 77

MARK = re.compile(rb"\x1b\](133;[ABCD][^\x1b\x07]*|7;[^\x1b\x07]*)\x1b\\")
PROMPT_READY = re.compile(rb"\x1b\]133;B\x1b\\")
# A command's end and the prompt after it. bash redraws the prompt once when Enter is
# pressed (the scripts' README), so the B before the command's D is not yet the next prompt.
COMMAND_DONE = re.compile(rb"\x1b\]133;D;[^\x1b]*\x1b\\.*?\x1b\]133;B\x1b\\", re.DOTALL)


class Failure(Exception):
    pass


def encoded(text):
    """The command line as the scripts encode it: every byte outside [A-Za-z0-9-._~/] as %XX."""
    return urllib.parse.quote(text.encode(), safe="/-._~")


def reset_signals():
    """Every signal back to its default action, none blocked, as the daemon's spawn does
    (src/backends/direct/spawn.cpp). The shell would otherwise inherit this process's state:
    Python ignores SIGPIPE and SIGXFSZ, and a background job of a shell without job control
    (`cmd &` in a script) ignores SIGINT and SIGQUIT. bash passes a signal ignored at its
    start on to every command it runs, so Ctrl-C would not interrupt one."""
    for sig in signal.valid_signals():
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP, and numbers with no signal behind them
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


class Shell:
    def __init__(self, argv, env, cwd):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                reset_signals()
                os.chdir(cwd)
                os.execve(shutil.which(argv[0]), argv, env)
            finally:
                os._exit(127)
        self.out = b""
        self.pos = 0  # what the checks have consumed

    def write(self, data):
        os.write(self.fd, data.encode() if isinstance(data, str) else data)

    def read_until(self, pattern, what):
        """Reads until `pattern` matches after the consumed part; returns the match."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            match = pattern.search(self.out, self.pos)
            if match:
                return match
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"no {what} within {TIMEOUT}s; unread bytes: {self.out[self.pos:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise Failure(f"the shell ended before {what}; unread bytes: {self.out[self.pos:]!r}")
                self.out += data

    def next_prompt(self, pattern=PROMPT_READY):
        """Consumes up to the end of the next prompt (its B mark); returns the bytes."""
        match = self.read_until(pattern, "prompt (OSC 133;B)" if pattern is PROMPT_READY else "D and a prompt")
        chunk = self.out[self.pos:match.end()]
        self.pos = match.end()
        return chunk

    def wait_for_foreground_job(self, program):
        """Waits until `program` runs as the terminal's foreground process group. A Ctrl-C that
        reaches bash before that (between C and the fork, or in the forked bash before its exec)
        interrupts bash itself, which then reports the previous status. Neither the terminal
        nor /proc tells an event for this: the state is polled, TIMEOUT bounding the wait."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            leader = os.tcgetpgrp(self.fd)
            try:
                with open(f"/proc/{leader}/comm", encoding="utf-8") as f:
                    if leader != self.pid and f.read().strip() == program:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise Failure(f"{program} did not start within {TIMEOUT}s")
            time.sleep(0.01)

    def wait_until_reading(self):
        """Waits until the shell sleeps, which after its prompt means: in its wait for input.
        A Ctrl-C that comes after bash drew the prompt but before readline blocks in its
        pselect() is handled by readline (^C echoed, terminal reset) while bash's own handler
        only runs once a read is interrupted: no new prompt until the next key. Polled like
        wait_for_foreground_job, for the same reason."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            with open(f"/proc/{self.pid}/stat", encoding="utf-8") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state == "S":
                return
            if time.monotonic() > deadline:
                raise Failure(f"the shell did not wait for input within {TIMEOUT}s (state {state})")
            time.sleep(0.01)

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def marks(chunk):
    return [(m.group(1).decode("latin-1"), m.start(), m.end()) for m in MARK.finditer(chunk)]


def check_prompt_tail(chunk, after, cwd, why):
    """From `after` on, `chunk` ends a command: OSC 7 (cwd), the user's hook, A, then B last."""
    tail = marks(chunk[after:])
    kinds = [kind if not kind.startswith("7;") else "7" for kind, _, _ in tail]
    if kinds != ["7", "133;A", "133;B"]:
        raise Failure(f"{why}: after the command, marks {kinds} instead of 7, A, B in {chunk[after:]!r}")
    cwd_url = f"7;file://{socket.gethostname()}{encoded(cwd)}"
    if tail[0][0] != cwd_url:
        raise Failure(f"{why}: OSC {tail[0][0]!r} instead of {cwd_url!r}")
    hook = chunk.find(b"[user-hook]", after)
    if not after + tail[0][2] <= hook < after + tail[1][1]:
        raise Failure(f"{why}: the user's prompt hook did not run between OSC 7 and A: {chunk[after:]!r}")


class Checks:
    def __init__(self, shell, name):
        self.shell = shell
        self.name = name
        self.cwd = None

    def command(self, line, expected_output=None, expected_status=None, cwd=None, prompt=None):
        """Types `line` and checks the bytes up to the next prompt."""
        if expected_output is None or expected_status is None:
            reference = subprocess.run(["sh", "-c", line], capture_output=True, cwd=self.cwd)
            expected_output = reference.stdout if expected_output is None else expected_output
            expected_status = reference.returncode if expected_status is None else expected_status
        self.shell.write(line.replace("\n", "\r") + "\r")
        chunk = self.shell.next_prompt(COMMAND_DONE)
        why = f"{self.name}: {line!r}"
        found = marks(chunk)
        kinds = [kind[:5] if kind.startswith("133;") else "7" for kind, _, _ in found]
        if kinds.count("133;C") != 1 or kinds.count("133;D") != 1:
            raise Failure(f"{why}: marks {kinds}: not one C and one D in {chunk!r}")
        c = kinds.index("133;C")
        d = kinds.index("133;D")
        # Before C, only the prompt being redrawn (A, B) may appear; the echo of the line and
        # its newline come after the last B and before C.
        if any(kind not in ("133;A", "133;B") for kind in kinds[:c]) or d != c + 1:
            raise Failure(f"{why}: marks in the order {kinds}")
        echo_start = found[c - 1][2] if c > 0 else 0
        echo = chunk[echo_start:found[c][1]]
        # Each typed line is echoed (a command of several lines: after its PS2 prompts).
        at = 0
        for typed in line.encode().split(b"\n"):
            at = echo.find(typed, at)
            if at < 0:
                raise Failure(f"{why}: the echo of {typed!r} is not before C: {echo!r}")
            at += len(typed)
        if b"\n" not in echo[at:]:
            raise Failure(f"{why}: no newline after the echo of the line, before C: {echo!r}")
        cmdline = found[c][0]
        if cmdline != "133;C;cmdline_url=" + encoded(line):
            raise Failure(f"{why}: C is {cmdline!r}, not the line encoded ({encoded(line)!r})")
        output = chunk[found[c][2]:found[d][1]].replace(b"\r\n", b"\n")
        if output != expected_output:
            raise Failure(f"{why}: output {output!r} instead of {expected_output!r}")
        status = found[d][0]
        if status != f"133;D;{expected_status}":
            raise Failure(f"{why}: {status!r} instead of D;{expected_status}")
        self.cwd = cwd or self.cwd
        check_prompt_tail(chunk, found[d][2], self.cwd, why)
        if prompt is not None:
            a_end = marks(chunk[found[d][2]:])[1][2] + found[d][2]
            if not chunk[a_end:].startswith(prompt.encode()):
                raise Failure(f"{why}: the prompt after A is not {prompt!r}: {chunk[a_end:]!r}")
        return output

    def interrupt_at_prompt(self):
        self.shell.wait_until_reading()
        self.shell.write("\x03")
        chunk = self.shell.next_prompt()
        kinds = [kind[:5] for kind, _, _ in marks(chunk)]
        if "133;C" in kinds or "133;D" in kinds:
            raise Failure(f"{self.name}: Ctrl-C at the prompt wrote {kinds}: {chunk!r}")

    def interrupt_command(self, line):
        self.shell.write(line + "\r")
        self.shell.read_until(re.compile(rb"\x1b\]133;C;[^\x1b]*\x1b\\"), f"C of {line!r}")
        self.shell.wait_for_foreground_job(line.split()[0])
        self.shell.write("\x03")
        chunk = self.shell.next_prompt(COMMAND_DONE)
        found = marks(chunk)
        statuses = [kind for kind, _, _ in found if kind.startswith("133;D")]
        if statuses != ["133;D;130"]:
            raise Failure(f"{self.name}: {line!r} interrupted gave {statuses}, not D;130: {chunk!r}")


USER_BASHRC = r"""
set -u
HISTCONTROL=ignoreboth
PTYVISOR_TEST_RC=from-rc
PROMPT_COMMAND='printf "[user-hook]"'
PS1='user\$ '
# Like bash-preexec: installs itself at the first prompt by assigning PROMPT_COMMAND a string
# built on its old value, which replaces the array's first element.
_user_install() { PROMPT_COMMAND="_user_installed; $PROMPT_COMMAND"; unset -f _user_install; }
_user_installed() { printf '[user-installed]'; }
PROMPT_COMMAND+=$'\n''! declare -F _user_install >/dev/null || _user_install'
"""

USER_ZSHRC = r"""
setopt hist_ignore_space
PTYVISOR_TEST_RC=from-rc
_user_hook() { print -n '[user-hook]' }
autoload -Uz add-zsh-hook
add-zsh-hook precmd _user_hook
PS1='user%# '
"""


def base_env(home):
    return {
        "HOME": home,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "TERM": "xterm",
        "LANG": "C.UTF-8",
        "USER": "tester",
    }


def start(shell_name, scripts, home, login=False, user_zdotdir=None):
    env = base_env(home)
    if shell_name == "bash":
        argv = ["bash", "--rcfile", os.path.join(scripts, "bash", "ptyvisor.bash"), "-i"]
        if login:
            env["PTYVISOR_SHELL_LOGIN"] = "1"
    else:
        argv = ["zsh", "-i"] + (["-l"] if login else [])
        env["ZDOTDIR"] = os.path.join(scripts, "zsh")
        if user_zdotdir is not None:
            env["PTYVISOR_USER_ZDOTDIR"] = user_zdotdir
    return Shell(argv, env, home)


def main_session(shell_name, scripts, home):
    with open(os.path.join(home, ".bashrc" if shell_name == "bash" else ".zshrc"), "w") as f:
        f.write(USER_BASHRC if shell_name == "bash" else USER_ZSHRC)
    shell = start(shell_name, scripts, home)
    try:
        checks = Checks(shell, shell_name)
        checks.cwd = home
        first = shell.next_prompt()
        check_prompt_tail(first, 0, home, f"{shell_name}: the first prompt")
        checks.command("true")
        checks.command("false")
        checks.command("(exit 7)")
        checks.command("printf abc")
        checks.command("echo 'héllo wörld'")
        checks.command(" echo 'starts with a space'")
        checks.command("echo $PTYVISOR_TEST_RC", expected_output=b"from-rc\n", expected_status=0)
        checks.command("for i in 1 2\ndo echo $i; done")
        checks.command("cd /tmp", cwd="/tmp")
        checks.command("ls -d .", prompt="user")
        checks.command("PS1='new> '", expected_output=b"", expected_status=0, prompt="new> ")
        checks.command("echo after", prompt="new> ")
        checks.interrupt_at_prompt()
        checks.command("echo after-interrupt")
        checks.interrupt_command("sleep 5")
        checks.command("echo after-sleep")
    finally:
        shell.close()


def login_session(shell_name, scripts, home):
    """A login shell reads the login files; zsh reads them from the user's ZDOTDIR."""
    if shell_name == "bash":
        with open(os.path.join(home, ".bash_profile"), "w") as f:
            f.write("PTYVISOR_TEST_FILES=profile\nPROMPT_COMMAND='printf \"[user-hook]\"'\n")
        with open(os.path.join(home, ".profile"), "w") as f:
            f.write("PTYVISOR_TEST_FILES=wrong-profile\n")
        shell = start(shell_name, scripts, home, login=True)
        expected = b"profile:unset\n"
    else:
        zdot = os.path.join(home, "zdot")
        os.mkdir(zdot)
        for name in ("zshenv", "zprofile", "zshrc", "zlogin"):
            with open(os.path.join(zdot, "." + name), "w") as f:
                f.write(f"PTYVISOR_TEST_FILES=${{PTYVISOR_TEST_FILES-}}{name}.\n")
        with open(os.path.join(zdot, ".zshrc"), "a") as f:
            f.write("precmd() { print -n '[user-hook]' }\n")
        shell = start(shell_name, scripts, home, login=True, user_zdotdir=zdot)
        expected = f"zshenv.zprofile.zshrc.zlogin.:unset:{zdot}\n".encode()
    try:
        checks = Checks(shell, shell_name + " login")
        checks.cwd = home
        shell.next_prompt()
        line = 'echo "$PTYVISOR_TEST_FILES:${PTYVISOR_SHELL_LOGIN-unset}' + (
            '"' if shell_name == "bash" else ':$ZDOTDIR"')
        checks.command(line, expected_output=expected, expected_status=0)
    finally:
        shell.close()


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("bash", "zsh"):
        sys.exit(__doc__)
    shell_name, scripts = sys.argv[1], os.path.abspath(sys.argv[2])
    if shutil.which(shell_name) is None:
        print(f"SKIPPED: {shell_name} is not installed")
        return SKIP
    try:
        for session in (main_session, login_session):
            with tempfile.TemporaryDirectory(prefix="ptyvisor-shell-") as home:
                session(shell_name, scripts, os.path.realpath(home))
    except Failure as failure:
        print(f"FAILED: {failure}")
        return 1
    print(f"passed: {shell_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
