"""Command-aware sessions (protocol version 4, section 11) against the real daemon, under
bash and zsh: exec() compared with `sh -c` run here, commands(), wait() for a command, a
prompt or input, LIST's new members, and the typed errors. Whatever the tests wait for, they
wait for through the daemon (an EXECUTED, a WAITED, an event): nothing here sleeps."""

import subprocess
import threading

import pytest

import ptyvisor
from ptyvisor import errors

SHELLS = ["/bin/bash", "/usr/bin/zsh"]


@pytest.fixture(params=SHELLS, ids=["bash", "zsh"])
def shell(request, client, session_env):
    """The id of a detached interactive shell with shell integration, killed at the end."""
    started = client.start([request.param, "-i"], env=session_env, shell_integration=True)
    yield started.id
    client.kill(started.id)


def next_event_of(watch, kind, timeout=20):
    """The next event named `kind` (the ones before it are skipped)."""
    while True:
        event = watch.next_event(timeout)
        assert event is not None, f"the watch ended before a {kind} event"
        if event.event == kind:
            return event


def sh(command):
    """What `sh -c command` prints and returns here: the expected result of exec()."""
    # The terminal carries stdout and stderr alike.
    done = subprocess.run(["sh", "-c", command], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    return done.returncode, done.stdout.decode("utf-8", "replace")


@pytest.mark.parametrize("command", [
    "true",
    "false",
    "(exit 7)",
    "printf abc",
    "echo 'héllo wörld ✓ 日本'",
    "printf 'one\\ntwo\\n'; echo three",
    "(echo to-stderr >&2; exit 3)",
])
def test_exec_matches_sh(client, shell, command):
    result = client.exec(shell, command, timeout=20)
    expected_code, expected_out = sh(command)
    assert result.state == "exited"
    assert result.exit_code == expected_code
    assert result.text() == expected_out
    assert not result.truncated
    assert result.record is not None and result.record.command == command
    assert result.record.exit_code == expected_code and result.seq == result.record.seq
    assert len(result.output) == result.record.output_end - result.record.output_start


def test_successive_commands_get_increasing_seqs_and_keep_the_directory(client, shell, tmp_path):
    first = client.exec(shell, "cd /tmp", timeout=20)
    second = client.exec(shell, "pwd", timeout=20)
    assert (first.state, first.exit_code, first.output) == ("exited", 0, b"")
    assert second.text() == sh("cd /tmp && pwd")[1] == "/tmp\n"
    assert second.seq == first.seq + 1
    assert second.record.cwd == "/tmp"


def test_exec_reads_more_than_one_page_of_output(client, shell):
    # Over 1 MiB through the terminal: the output is read back in several READs.
    command = "seq 1 200000"
    result = client.exec(shell, command, timeout=60)
    assert result.state == "exited" and result.exit_code == 0
    assert len(result.output) > 1048576
    assert result.text() == sh(command)[1]
    assert not result.truncated


def test_max_output_bytes_truncates(client, shell):
    result = client.exec(shell, "seq 1 1000", timeout=20, max_output_bytes=10)
    assert result.exit_code == 0 and result.truncated
    assert result.output == b"1\r\n2\r\n3\r\n4"


def test_a_command_that_reads_a_line_waits_for_input(client, shell):
    result = client.exec(shell, "read line; echo got $line", timeout=20)
    assert result.state == "waiting_for_input"
    assert result.exit_code is None and result.record.running
    listed = {s.id: s for s in client.list()}[shell]
    assert listed.waiting_for_input and not listed.at_prompt
    assert isinstance(listed.waiting_since, int) and listed.waiting_since > 0
    assert listed.last_command.seq == result.seq and listed.last_command.running
    assert listed.shell in ("bash", "zsh")
    client.send(shell, "x\r")
    waited = client.wait(shell, for_="command", after=result.seq - 1, timeout=20)
    assert waited.reason == "command" and waited.matched
    assert waited.command.seq == result.seq and waited.command.exit_code == 0
    log = client.read(shell, waited.command.output_start,
                      waited.command.output_end - waited.command.output_start)
    assert log.data.endswith(b"got x\r\n")


def test_timeout_leaves_the_command_running(client, shell):
    result = client.exec(shell, "sleep 100", timeout=0.5)
    assert result.state == "timeout" and result.exit_code is None
    assert result.record is not None and result.record.running
    assert client.commands(shell).current.seq == result.seq
    client.send(shell, "\x03")
    waited = client.wait(shell, for_="command", after=result.seq - 1, timeout=20)
    assert waited.command.seq == result.seq and waited.command.exit_code == 130


def test_interrupt_ends_the_command_with_ctrl_c(client, shell):
    result = client.exec(shell, "sleep 100", timeout=0.5, interrupt=True)
    assert result.state == "interrupted" and result.exit_code == 130
    assert result.record.exit_code == 130 and not result.record.running
    assert client.wait(shell, for_="prompt", timeout=20).reason == "prompt"


def test_a_second_exec_while_one_runs_is_busy(client, shell):
    with client.watch(shell) as events:
        results = []
        first = threading.Thread(target=lambda: results.append(
            client.exec(shell, "sleep 100", timeout=60)))
        first.start()
        try:
            started = next_event_of(events, "command_start")
            assert started.command.command == "sleep 100"
            with pytest.raises(errors.Busy):
                client.exec(shell, "true", timeout=20)
        finally:
            # Ending the session ends the first exec at once, wherever its command is (a
            # Ctrl-C as early as the start mark could reach the shell's line editor).
            client.kill(shell)
            first.join(60)
    assert results[0].state == "session_ended" and results[0].exit_code is None


def test_commands_lists_the_records(client, shell):
    first = client.exec(shell, "echo one", timeout=20)
    second = client.exec(shell, "(exit 2)", timeout=20)
    # EXECUTED comes at the command's end mark; the next prompt's marks follow it.
    assert client.wait(shell, for_="prompt", timeout=20).reason == "prompt"
    listing = client.commands(shell)
    assert listing.id == shell and listing.shell in ("bash", "zsh")
    assert listing.at_prompt and listing.current is None
    assert [(r.seq, r.command, r.exit_code) for r in listing.commands[-2:]] == [
        (first.seq, "echo one", 0), (second.seq, "(exit 2)", 2)]
    assert 1 <= listing.first_seq <= first.seq
    later = client.commands(shell, since=first.seq)
    assert [r.seq for r in later.commands] == [second.seq]
    assert all(r.ended_ms >= r.started_ms > 0 for r in listing.commands)


def test_wait_for_prompt_and_input_at_the_prompt(client, shell):
    assert client.wait(shell, for_="prompt", timeout=20).reason == "prompt"
    assert client.wait(shell, "input", timeout=20).reason == "input"


def test_wait_for_the_command_that_waited_for_input(client, shell):
    # after=seq-1 (protocol 11.4): the command may end between the send and the wait.
    client.wait(shell, for_="prompt", timeout=20)
    result = client.exec(shell, "read a; exit_with() { return $1; }; exit_with 5", timeout=20)
    assert result.state == "waiting_for_input"
    client.send(shell, "go\r")
    waited = client.wait(shell, for_="command", after=result.seq - 1, timeout=20)
    assert waited.command.seq == result.seq and waited.command.exit_code == 5


def test_exec_in_a_session_without_shell_integration(client, session_env):
    started = client.start(["/bin/bash", "-i"], env=session_env)
    try:
        with pytest.raises(errors.NoShellIntegration) as e:
            client.exec(started.id, "true", timeout=10)
        assert e.value.code == "no_shell_integration"
        listing = client.commands(started.id)
        assert listing.shell is None and listing.current is None and listing.commands == []
        info = {s.id: s for s in client.list()}[started.id]
        assert info.shell is None and info.last_command is None
    finally:
        client.kill(started.id)


def test_exec_in_an_exited_session_is_session_ended(client, session_env):
    started = client.start(["/bin/bash", "-i"], env=session_env, shell_integration=True)
    client.wait(started.id, for_="prompt", timeout=20)
    result = client.exec(started.id, "exit 4", timeout=20)
    assert result.state == "session_ended" and result.exit_code is None
    assert client.wait(started.id, timeout=20).exit.code == 4
    with pytest.raises(errors.SessionEnded):
        client.exec(started.id, "true", timeout=10)


def test_shell_integration_refuses_what_is_not_an_interactive_shell(client, session_env):
    with pytest.raises(errors.BadFrame):
        client.start(["bash", "-c", "true"], env=session_env, shell_integration=True)


def test_exec_refuses_a_second_line_before_sending(client):
    with pytest.raises(ValueError):
        client.exec("a" * 32, "true\nfalse")
    with pytest.raises(ValueError):
        client.exec("a" * 32, "")


def test_the_async_client_execs(session_env):
    import asyncio

    async def scenario():
        client = ptyvisor.AsyncClient()
        started = await client.start(["/usr/bin/zsh", "-i"], env=session_env,
                                     shell_integration=True)
        try:
            result = await client.exec(started.id, "printf 'a\\nb'; (exit 3)", timeout=20)
            waiting = await client.exec(started.id, "read x", timeout=20)
            await client.send(started.id, "y\r")
            waited = await client.wait(started.id, for_="command", after=waiting.seq - 1,
                                       timeout=20)
            listing = await client.commands(started.id)
            return result, waiting, waited, listing
        finally:
            await client.kill(started.id)
    result, waiting, waited, listing = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert (result.state, result.exit_code) == ("exited", 3)
    assert result.text() == "a\nb"
    assert waiting.state == "waiting_for_input"
    assert waited.command.seq == waiting.seq and waited.command.exit_code == 0
    assert listing.shell == "zsh" and listing.commands[-1].seq == waiting.seq


def test_spawn_with_shell_integration(client, session_env):
    child = ptyvisor.spawn("/bin/bash", ["-i"], env=session_env, shell_integration=True,
                           timeout=20)
    try:
        child.sendline("echo spawned")
        child.expect_exact("spawned")
        waited = client.wait(child.id, for_="command", after=0, timeout=20)
        assert waited.command.command == "echo spawned" and waited.command.exit_code == 0
    finally:
        child.close()


def test_watch_tells_a_command_an_input_wait_and_the_exit(client, shell):
    client.wait(shell, for_="prompt", timeout=20)
    with client.watch(shell) as events:
        result = client.exec(shell, "echo watched; (exit 6)", timeout=20)
        started = next_event_of(events, "command_start")
        ended = next_event_of(events, "command_end")
        assert started.command.seq == ended.command.seq == result.seq
        assert started.command.running and ended.command.exit_code == 6
        assert ended.offset >= ended.command.output_end
        next_event_of(events, "prompt")

        waiting = client.exec(shell, "read line", timeout=20)
        assert waiting.state == "waiting_for_input"
        assert next_event_of(events, "command_start").command.seq == waiting.seq
        wait = next_event_of(events, "input")
        assert isinstance(wait.since_ms, int) and wait.since_ms > 0
        client.send(shell, "x\r")
        assert next_event_of(events, "command_end").command.exit_code == 0

        client.send(shell, "exit 9\r")
        last = next_event_of(events, "exit")
        assert last.exit.code == 9
        assert events.next_event() is None and list(events) == []


def test_watch_of_an_exited_session_tells_its_exit(client, session_env):
    started = client.start(["/bin/bash", "-i"], env=session_env, shell_integration=True)
    client.send(started.id, "exit 2\r")
    client.wait(started.id, timeout=20)
    with client.watch(started.id) as events:
        assert [e.event for e in events] == ["exit"]


def test_closing_a_watch_unsubscribes(client, shell):
    events = client.watch(shell)
    client.exec(shell, "true", timeout=20)
    assert next_event_of(events, "command_end").command.command == "true"
    events.close()
    assert events.next_event() is None
    # The daemon dropped the subscription: the session still answers.
    assert client.exec(shell, "true", timeout=20).exit_code == 0


def test_the_async_watch(session_env):
    import asyncio

    async def scenario():
        client = ptyvisor.AsyncClient()
        started = await client.start(["/bin/bash", "-i"], env=session_env,
                                     shell_integration=True)
        await client.wait(started.id, for_="prompt", timeout=20)
        seen = []
        async with await client.watch(started.id) as events:
            result = await client.exec(started.id, "echo async-watch", timeout=20)
            async for event in events:
                seen.append(event)
                if event.event == "command_end":
                    await client.send(started.id, "exit 5\r")
        return result, seen
    result, seen = asyncio.run(asyncio.wait_for(scenario(), 60))
    names = [e.event for e in seen]
    assert "command_start" in names and names[-1] == "exit"
    end = next(e for e in seen if e.event == "command_end")
    assert end.command.seq == result.seq and end.command.exit_code == 0
    assert seen[-1].exit.code == 5
