"""The session calls (protocol section 9), blocking: start detached, attach, list, read,
wait, kill, send; and the typed errors with the protocol's codes."""

import os
import signal

import pytest

import ptyvisor
from ptyvisor import errors

NO_SUCH_ID = "0" * 32


def start_sh(client, script, session_env, **kw):
    return client.start(["sh", "-c", script], env=session_env, **kw)


def test_start_returns_an_id_and_the_session_outlives_the_call(client, session_env):
    started = start_sh(client, "echo ready; sleep 60", session_env)
    try:
        assert len(started.id) == 32 and started.id in started.unit
        waited = client.wait(started.id, "text", pattern="ready", timeout=10)
        assert waited.matched and waited.reason == "text"
        assert (waited.match_start, waited.match_end) == (0, 5)
        listed = {s.id: s for s in client.list()}
        assert listed[started.id].state == "running"
        assert listed[started.id].argv == ["sh", "-c", "echo ready; sleep 60"]
        assert listed[started.id].detached
    finally:
        client.kill(started.id)


def test_wait_for_exit_gives_the_exit_status(client, session_env):
    started = start_sh(client, "exit 3", session_env)
    waited = client.wait(started.id, timeout=10)
    assert waited.reason == "exit" and waited.state == "exited"
    assert waited.exit.status == "exited" and waited.exit.code == 3
    assert waited.exit.shell_status == 3


def test_wait_times_out(client, session_env):
    started = start_sh(client, "sleep 60", session_env)
    try:
        waited = client.wait(started.id, "text", pattern="never", timeout=0.3)
        assert not waited.matched and waited.reason == "timeout"
    finally:
        client.kill(started.id)


def test_wait_for_quiet(client, session_env):
    started = start_sh(client, "echo busy; sleep 60", session_env)
    try:
        waited = client.wait(started.id, "quiet", quiet=0.2, timeout=10)
        assert waited.reason == "quiet" and waited.matched
    finally:
        client.kill(started.id)


def test_read_by_offset_and_in_pieces(client, session_env):
    started = start_sh(client, "printf 0123456789", session_env)
    client.wait(started.id, timeout=10)
    whole = client.read(started.id)
    assert whole.data == b"0123456789" and whole.end == 10 and whole.state == "exited"
    piece = client.read(started.id, offset=3, max_bytes=4)
    assert (piece.offset, piece.data) == (3, b"3456")
    assert piece.offset + len(piece.data) < piece.end
    assert client.read(started.id, offset="tail").data == b""


def test_send_types_into_the_session(client, session_env):
    started = start_sh(client, "read line; echo got $line", session_env)
    assert client.send(started.id, "hello\n") == 6
    assert client.wait(started.id, "text", pattern="got hello", timeout=10).matched
    client.wait(started.id, timeout=10)


def test_kill_without_signal_ends_and_waits(client, session_env):
    started = start_sh(client, "sleep 60", session_env)
    killed = client.kill(started.id)
    assert killed.state == "exited" and killed.exit.reason == "stopped"


def test_kill_with_a_signal_returns_at_once(client, session_env):
    started = start_sh(client, "sleep 60", session_env)
    killed = client.kill(started.id, signal.SIGTERM)
    assert killed.id == started.id
    waited = client.wait(started.id, timeout=10)
    assert waited.exit.status == "signaled" and waited.exit.signal == signal.SIGTERM


def test_attach_as_controller_relays_both_ways(client, session_env):
    started = start_sh(client, "read line; echo got $line", session_env)
    with client.attach(started.id, offset="start") as attached:
        assert attached.role == "controller" and attached.attached.offset == 0
        attached.write("abc\n")
        out = attached.read_to_end(timeout=10)
        assert b"got abc" in out
        assert attached.exit.code == 0


def test_attach_observer_replays_from_start_and_sees_exit(client, session_env):
    started = start_sh(client, "echo one; echo two", session_env)
    client.wait(started.id, timeout=10)
    with client.attach(started.id, role="observer", offset="start") as observer:
        assert observer.read_to_end(timeout=10) == b"one\r\ntwo\r\n"
        assert observer.exit.status == "exited"


def test_attach_from_an_offset(client, session_env):
    started = start_sh(client, "printf abcdef; sleep 60", session_env)
    try:
        client.wait(started.id, "text", pattern="f", timeout=10)
        with client.attach(started.id, role="observer", offset=2) as observer:
            assert observer.attached.offset == 2
            got = b""
            while len(got) < 4:
                got += observer.read(timeout=10)
            assert got == b"cdef"
    finally:
        client.kill(started.id)


def test_detach_leaves_the_session_running(client, session_env):
    started = start_sh(client, "echo hi; sleep 60", session_env)
    try:
        attached = client.attach(started.id, offset="start")
        offset = attached.detach()
        assert isinstance(offset, int)
        assert client.list() and {s.id: s.state for s in client.list()}[started.id] == "running"
    finally:
        client.kill(started.id)


def test_a_second_controller_is_busy_unless_it_takes_over(client, session_env):
    started = start_sh(client, "sleep 60", session_env)
    try:
        first = client.attach(started.id)
        with pytest.raises(errors.Busy) as busy:
            client.attach(started.id)
        assert busy.value.code == "busy"
        second = client.attach(started.id, takeover=True)
        assert first.read(timeout=10) == b"" and first.ended
        second.close()
    finally:
        client.kill(started.id)


def test_an_observer_may_not_type(client, session_env):
    started = start_sh(client, "sleep 60", session_env)
    try:
        observer = client.attach(started.id, role="observer")
        observer.write("x")
        with pytest.raises(errors.NotAllowed):
            observer.read_to_end(timeout=10)
    finally:
        client.kill(started.id)


def test_unknown_id_is_no_such_session(client):
    for call in (lambda: client.read(NO_SUCH_ID), lambda: client.wait(NO_SUCH_ID),
                 lambda: client.kill(NO_SUCH_ID), lambda: client.send(NO_SUCH_ID, "x"),
                 lambda: client.attach(NO_SUCH_ID)):
        with pytest.raises(errors.NoSuchSession) as e:
            call()
        assert e.value.code == "no_such_session"
        assert isinstance(e.value, ptyvisor.PtyvisorError)


def test_send_to_an_exited_session_is_session_ended(client, session_env):
    started = start_sh(client, "true", session_env)
    client.wait(started.id, timeout=10)
    with pytest.raises(errors.SessionEnded):
        client.send(started.id, "x")


def test_a_missing_command_is_start_failed(client, session_env):
    with pytest.raises(errors.StartFailed) as e:
        client.start(["/nonexistent/command"], env=session_env)
    assert e.value.code == "start_failed"


def test_unknown_codes_map_to_internal_with_the_code_kept():
    e = errors.error_from_payload({"code": "from_the_future", "message": "m"})
    assert isinstance(e, errors.Internal) and e.code == "from_the_future"


def test_ptyvisor_socket_is_honoured(monkeypatch, tmp_path, daemon_socket):
    assert ptyvisor.Client().socket_path == daemon_socket
    monkeypatch.setenv("PTYVISOR_SOCKET", str(tmp_path / "none.sock"))
    with pytest.raises(FileNotFoundError):
        ptyvisor.Client().list()
    monkeypatch.delenv("PTYVISOR_SOCKET")
    assert ptyvisor.default_socket_path() == "/run/ptyvisor/ptyvisor.sock"


def test_invalid_ids_are_refused_before_sending(client):
    with pytest.raises(ValueError):
        client.read("../etc/passwd")


def test_cwd_of_a_started_session(client, session_env, tmp_path):
    started = client.start(["pwd"], cwd=tmp_path, env=session_env)
    client.wait(started.id, timeout=10)
    assert client.read(started.id).data.strip() == os.fsencode(tmp_path)
