"""pexpect's core, as its users write it, run against real pexpect and against ptyvisor.

Every test takes `pexpect_module`, which is either the `pexpect` module or `ptyvisor`: the
same code, only the import changed. What passes for pexpect and fails for ptyvisor is a
difference of behaviour."""

import importlib
import io
import re
import signal

import pytest


@pytest.fixture(params=["pexpect", "ptyvisor"])
def pexpect_module(request):
    return importlib.import_module(request.param)


def start_with_default_signals():
    """The reference child's start, as ptyvisor gives each session: every signal at its default
    action and none blocked. Otherwise pexpect's child inherits what the suite was started
    with, e.g. SIGINT ignored under nohup or in a background job, and ^C does not end it."""
    for number in range(1, signal.NSIG):
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL, SIGSTOP and the numbers that name no signal
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


@pytest.fixture
def spawn(pexpect_module, session_env):
    children = []

    def make(*args, **kw):
        kw.setdefault("env", session_env)
        kw.setdefault("timeout", 10)
        if pexpect_module.__name__ == "pexpect":
            kw.setdefault("preexec_fn", start_with_default_signals)
        child = pexpect_module.spawn(*args, **kw)
        children.append(child)
        return child

    yield make
    for child in children:
        child.close(force=True)


def test_expect_sets_before_after_and_match(spawn):
    child = spawn("echo hello world 42")
    assert child.expect(r"world (\d+)") == 0
    assert child.before == b"hello "
    assert child.after == b"world 42"
    assert child.match.group(1) == b"42"


def test_expect_list_picks_the_earliest_match(spawn):
    child = spawn("sh -c 'echo xx abcdef yy; sleep 10'")
    assert child.expect([b"def", b"b"]) == 1
    assert child.before == b"xx a"


def test_expect_ties_go_to_the_pattern_listed_first(spawn):
    child = spawn("sh -c 'echo abcdef; sleep 10'")
    assert child.expect(["c.e", "cd."]) == 0
    assert child.after == b"cde"
    assert child.expect(["f", "f"]) == 0


def test_expect_accepts_compiled_patterns(spawn):
    child = spawn("echo Version 3.11")
    assert child.expect(re.compile(rb"version (\S+)", re.IGNORECASE)) == 0
    assert child.match.group(1) == b"3.11"


def test_eof_as_a_pattern_returns_its_index_and_the_rest(spawn, pexpect_module):
    child = spawn("echo last words")
    assert child.expect(["never", pexpect_module.EOF]) == 1
    assert child.before == b"last words\r\n"
    assert child.after is pexpect_module.EOF
    child.close()
    assert child.exitstatus == 0
    assert child.signalstatus is None


def test_eof_not_listed_raises_eof(spawn, pexpect_module):
    child = spawn("true")
    with pytest.raises(pexpect_module.EOF):
        child.expect("never")


def test_timeout_as_a_pattern_keeps_the_buffer(spawn, pexpect_module):
    child = spawn("cat")
    child.sendline("partial")
    assert child.expect(["never", pexpect_module.TIMEOUT], timeout=0.5) == 1
    assert child.after is pexpect_module.TIMEOUT
    assert child.expect("partial") == 0


def test_timeout_not_listed_raises_timeout(spawn, pexpect_module):
    child = spawn("cat")
    with pytest.raises(pexpect_module.TIMEOUT):
        child.expect("never", timeout=0.3)


def test_exceptions_derive_from_exception_pexpect(pexpect_module):
    assert issubclass(pexpect_module.EOF, pexpect_module.ExceptionPexpect)
    assert issubclass(pexpect_module.TIMEOUT, pexpect_module.ExceptionPexpect)


def test_expect_exact_takes_metacharacters_literally(spawn):
    child = spawn("echo 'a.c a+c [x]'")
    assert child.expect_exact(["[x]", "a+c"]) == 1
    assert child.before == b"a.c "
    assert child.expect_exact("[x]") == 0


def test_sendline_is_echoed_and_answered(spawn):
    child = spawn("cat")
    n = child.sendline("ping")
    assert n == 5
    child.expect("ping\r\n")   # the terminal's echo
    child.expect("ping\r\n")   # cat's copy
    assert child.before == b""


def test_sendeof_ends_cat(spawn, pexpect_module):
    child = spawn("cat")
    child.sendline("x")
    child.expect("x\r\nx\r\n")
    child.sendeof()
    child.expect(pexpect_module.EOF)
    child.close()
    assert child.exitstatus == 0


def test_sendcontrol_c_interrupts(spawn, pexpect_module):
    child = spawn("cat")
    assert child.sendcontrol("c") == 1
    child.expect(pexpect_module.EOF)
    child.close()
    assert child.exitstatus is None
    assert child.signalstatus == signal.SIGINT


def test_wait_returns_the_exit_status(spawn):
    child = spawn("sh -c 'exit 7'")
    assert child.wait() == 7
    assert child.exitstatus == 7
    assert not child.isalive()


def test_isalive_while_running_and_after_the_end(spawn, pexpect_module):
    child = spawn("cat")
    assert child.isalive()
    child.sendeof()
    child.expect(pexpect_module.EOF)
    child.wait()
    assert not child.isalive()


def test_kill_with_a_signal(spawn, pexpect_module):
    child = spawn("sleep 100")
    child.kill(signal.SIGTERM)
    child.expect(pexpect_module.EOF)
    child.close()
    assert child.signalstatus == signal.SIGTERM


def test_close_ends_a_running_child(spawn):
    child = spawn("sleep 100")
    child.close()
    assert not child.isalive()
    assert child.closed


def test_args_are_passed_unsplit(spawn):
    child = spawn("echo", ["a  b", "c"])
    child.expect("\r\n")
    assert child.before == b"a  b c"


def test_cwd_and_env(spawn, tmp_path, session_env):
    env = dict(session_env, GREETING="from env")
    child = spawn("sh -c 'pwd; echo $GREETING'", cwd=str(tmp_path), env=env)
    child.expect("from env")
    assert str(tmp_path).encode() in child.before


def test_dimensions_and_setwinsize(spawn):
    child = spawn("sh -c 'stty size; read x; stty size'", dimensions=(30, 90))
    child.expect(r"(\d+) (\d+)\r\n")
    assert child.match.groups() == (b"30", b"90")
    child.setwinsize(40, 100)
    child.sendline("")
    child.expect(r"(\d+) (\d+)\r\n")
    assert child.match.groups() == (b"40", b"100")


def test_encoding_gives_text(spawn, pexpect_module):
    child = spawn("echo 'caf\u00e9 \u2713'", encoding="utf-8")
    child.expect("\u2713")
    assert child.before == "caf\u00e9 "
    assert isinstance(child.after, str)
    child.expect(pexpect_module.EOF)


def test_read_nonblocking(spawn, pexpect_module):
    child = spawn("sh -c 'echo abc; sleep 10'")
    got = b""
    while b"abc" not in got:
        got += child.read_nonblocking(100, timeout=5)
    with pytest.raises(pexpect_module.TIMEOUT):
        child.read_nonblocking(1, timeout=0.2)


def test_read_nonblocking_raises_eof_at_the_end(spawn, pexpect_module):
    child = spawn("echo bye")
    got = b""
    with pytest.raises(pexpect_module.EOF):
        while True:
            got += child.read_nonblocking(100, timeout=5)
    assert got == b"bye\r\n"


def test_read_and_readline(spawn):
    child = spawn("sh -c 'echo one; echo two'")
    assert child.readline() == b"one\r\n"
    assert child.read() == b"two\r\n"


def test_pid_is_the_command(spawn):
    child = spawn("sleep 100")
    assert isinstance(child.pid, int) and child.pid > 0


def test_logfile_read_sees_the_output(spawn):
    child = spawn("echo logged")
    sink = io.BytesIO()
    child.logfile_read = sink
    child.expect("logged")
    assert b"logged" in sink.getvalue()


def test_drive_a_python_repl(spawn, pexpect_module, python3):
    child = spawn(python3 + " -q", encoding="utf-8")
    child.expect(">>> ")
    child.sendline("print(6 * 7)")
    child.expect(">>> ")
    assert "42" in child.before
    child.sendline("exit()")
    child.expect(pexpect_module.EOF)
    child.close()
    assert child.exitstatus == 0


def test_run_returns_the_output(pexpect_module, session_env):
    assert pexpect_module.run("echo hi there", env=session_env) == b"hi there\r\n"


def test_run_with_exit_status(pexpect_module, session_env):
    output, status = pexpect_module.run("sh -c 'echo out; exit 3'", withexitstatus=True,
                                        env=session_env)
    assert (output, status) == (b"out\r\n", 3)


def test_run_answers_events(pexpect_module, session_env):
    script = "sh -c 'printf \"name? \"; read n; printf \"age? \"; read a; echo $n is $a'"
    seen = []

    def age(context):
        seen.append(context["event_count"])
        return "42\n"
    output = pexpect_module.run(script, events=[(r"name\? ", "bob\n"), (r"age\? ", age)],
                                env=session_env, timeout=10)
    assert b"bob is 42" in output
    assert seen == [1]
