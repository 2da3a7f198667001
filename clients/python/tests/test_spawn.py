"""What ptyvisor.spawn does beyond pexpect, or differently (README, "Where it differs")."""

import pytest

import ptyvisor
from ptyvisor import errors


def test_a_large_input_to_a_command_that_answers_does_not_deadlock(session_env):
    # cat sends back what we write: 800 KB, more than the buffers between us and the daemon
    # hold, so a client that stopped reading while it writes would block for ever (protocol
    # section 7). Echo is off: the line discipline drops echoes under such a flood.
    child = ptyvisor.spawn("sh -c 'stty -echo; echo ready; exec cat'", env=session_env,
                           timeout=60)
    child.expect("ready\r\n")
    line = "x" * 99 + "\n"
    child.send(line * 8000 + "END\n")
    child.expect("END\r\n")
    assert child.before == (line.replace("\n", "\r\n") * 8000).encode()
    child.sendeof()
    child.expect(ptyvisor.EOF)
    child.close()
    assert child.exitstatus == 0


def test_the_session_is_bound_to_the_spawn_object(client, session_env):
    child = ptyvisor.spawn("sleep 100", env=session_env)
    assert len(child.id) == 32 and child.id in child.unit
    assert {s.id: s.detached for s in client.list()}[child.id] is False
    child.close()
    assert child.exit_reason == "stopped"
    states = {s.id: s.state for s in client.list()}
    assert states.get(child.id, "exited") == "exited"


def test_a_missing_command_is_start_failed_and_an_exception_pexpect(session_env):
    with pytest.raises(ptyvisor.ExceptionPexpect) as e:
        ptyvisor.spawn("/nonexistent/command", env=session_env)
    assert isinstance(e.value, errors.StartFailed) and e.value.code == "start_failed"


@pytest.mark.parametrize("option", [{"echo": False}, {"preexec_fn": print}])
def test_unsupported_options_are_refused(option, session_env):
    with pytest.raises(ptyvisor.ExceptionPexpect):
        ptyvisor.spawn("true", env=session_env, **option)


def test_a_utf8_character_split_across_frames_is_whole(session_env):
    # 4-byte characters across the 64 KiB frame bound: the incremental decoder joins them.
    child = ptyvisor.spawn("python3 -c \"import sys; sys.stdout.write('\U0001F600' * 40000)\"",
                           env=session_env, encoding="utf-8", timeout=30)
    child.expect(ptyvisor.EOF)
    assert child.before == "\U0001F600" * 40000


def test_expect_async_is_refused(session_env):
    child = ptyvisor.spawn("echo x", env=session_env)
    with pytest.raises(ptyvisor.ExceptionPexpect):
        child.expect("x", async_=True)
    child.close()
