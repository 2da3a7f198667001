"""A fake daemon that breaks the protocol: every byte from the daemon is checked, and a
broken reply is a typed error (ProtocolError, ConnectionLost), never a crash or a hang."""

import asyncio
import json
import socket
import struct
import threading

import pytest

import ptyvisor
from ptyvisor import errors

SID = "a" * 32


def frame(ftype, payload=b"", version=2):
    if isinstance(payload, dict):
        payload = json.dumps(payload).encode()
    return b"PV" + bytes([version, ftype]) + struct.pack(">I", len(payload)) + payload


@pytest.fixture
def fake_daemon(tmp_path):
    """fake_daemon(reply_bytes) -> socket path. The server accepts one connection, reads the
    request's first bytes (kept in fake_daemon.requests), writes reply_bytes and closes."""
    threads: list[threading.Thread] = []
    requests: list[bytes] = []

    def serve(reply: bytes):
        path = str(tmp_path / f"fake{len(threads)}.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        server.settimeout(10)

        def run():
            with server:
                conn, _ = server.accept()
                with conn:
                    requests.append(conn.recv(65536))
                    conn.sendall(reply)
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        return path

    serve.requests = requests  # type: ignore[attr-defined]  # what the tests read back
    yield serve
    for thread in threads:
        thread.join(10)


def list_with(path):
    return ptyvisor.Client(path, timeout=10).list()


@pytest.mark.parametrize("reply", [
    b"XV\x02\x11\x00\x00\x00\x02{}",                       # bad magic
    b"PV\x07\x11\x00\x00\x00\x02{}",                       # unknown version
    b"PV\x02\x63\x00\x00\x00\x02{}",                       # unknown type
    b"PV\x02\x11\xff\xff\xff\xff",                         # over SESSIONS' bound
    frame(17, b"not json"),
    frame(17, {"sessions": "many"}),
    frame(17, {"sessions": [{"id": 5}]}),
    frame(17, {"sessions": [{"id": SID, "exit": "soon"}]}),
    frame(2, {"unit": "u", "pid": 1, "id": SID}),          # a frame that is no reply to LIST
    b"PV\x02\x11\x00\x00\x00\x10{}",                       # closed in the middle of a frame
])
def test_a_broken_reply_is_a_protocol_error(fake_daemon, reply):
    with pytest.raises(errors.ProtocolError):
        list_with(fake_daemon(reply))


def test_no_reply_is_connection_lost(fake_daemon):
    with pytest.raises(errors.ConnectionLost):
        list_with(fake_daemon(b""))


def test_an_error_before_anything_is_typed_and_version_1_is_read(fake_daemon):
    path = fake_daemon(frame(9, {"code": "overloaded", "message": "later"}, version=1))
    with pytest.raises(errors.Overloaded) as e:
        list_with(path)
    assert e.value.message == "later"


def test_a_log_shorter_than_announced_is_connection_lost(fake_daemon):
    head = {"id": SID, "start": 0, "offset": 0, "length": 5, "end": 5, "state": "running",
            "exit": None}
    path = fake_daemon(frame(19, head) + frame(4, b"ab"))
    with pytest.raises(errors.ConnectionLost):
        ptyvisor.Client(path, timeout=10).read(SID)


def test_a_log_longer_than_announced_is_a_protocol_error(fake_daemon):
    head = {"id": SID, "start": 0, "offset": 0, "length": 1, "end": 5, "state": "running",
            "exit": None}
    path = fake_daemon(frame(19, head) + frame(4, b"abcde"))
    with pytest.raises(errors.ProtocolError):
        ptyvisor.Client(path, timeout=10).read(SID)


def test_a_version_1_daemon_is_told_apart(fake_daemon, session_env):
    path = fake_daemon(frame(2, {"unit": "ptyvisor-x.service", "pid": 1}, version=1))
    with pytest.raises(errors.ProtocolError, match="version 2"):
        ptyvisor.spawn("true", env=session_env, socket_path=path)


def test_spawn_sees_a_session_lost_without_exit(fake_daemon, session_env):
    started = {"unit": f"ptyvisor-{SID}.service", "pid": 1, "id": SID}
    path = fake_daemon(frame(2, started) + frame(4, b"partial output"))
    child = ptyvisor.spawn("true", env=session_env, socket_path=path, timeout=10)
    assert child.expect("partial") == 0
    with pytest.raises(errors.ConnectionLost):
        child.expect(ptyvisor.EOF)


def test_an_exit_with_a_wrong_type_is_a_protocol_error(fake_daemon, session_env):
    started = {"unit": f"ptyvisor-{SID}.service", "pid": 1, "id": SID}
    path = fake_daemon(frame(2, started) + frame(8, {"status": "exited", "code": "zero",
                                                     "reason": "exited"}))
    child = ptyvisor.spawn("true", env=session_env, socket_path=path, timeout=10)
    with pytest.raises(errors.ProtocolError):
        child.expect(ptyvisor.EOF)


def test_asyncio_client_checks_too(fake_daemon):
    path = fake_daemon(frame(17, {"sessions": [1]}))

    async def scenario():
        return await ptyvisor.AsyncClient(path, timeout=10).list()
    with pytest.raises(errors.ProtocolError):
        asyncio.run(scenario())


def attached_then(*frames):
    head = {"id": SID, "unit": f"ptyvisor-{SID}.service", "pid": 1, "role": "observer",
            "start": 0, "end": 10, "offset": 4, "state": "running",
            "size": {"rows": 24, "cols": 80}}
    return frame(13, head) + b"".join(frames)


DROPPING = attached_then(frame(4, b"ab"), frame(26, {"offset": 100, "lost": 94}),
                         frame(4, b"xyz"),
                         frame(8, {"status": "exited", "code": 0, "reason": "exited"}))


def test_an_observer_that_fell_behind_counts_what_it_lost(fake_daemon):
    observer = ptyvisor.Client(fake_daemon(DROPPING), timeout=10).attach(SID, role="observer")
    assert observer.attached.offset == 4
    assert observer.read_to_end(timeout=10) == b"abxyz"
    assert observer.lost == 94 and observer.offset == 103
    assert observer.exit is not None and observer.exit.code == 0


def test_an_async_observer_that_fell_behind_counts_what_it_lost(fake_daemon):
    path = fake_daemon(DROPPING)

    async def scenario():
        observer = await ptyvisor.AsyncClient(path, timeout=10).attach(SID, role="observer")
        return await observer.read_to_end(), observer
    data, observer = asyncio.run(scenario())
    assert data == b"abxyz" and observer.lost == 94 and observer.offset == 103


# -- snapshot (protocol section 10) ------------------------------------------------------

def a_screen(**changes):
    body = {"id": SID, "cols": 4, "rows": 2, "cursor": {"row": 0, "col": 2, "visible": True},
            "alternate": False, "title": "", "offset": 2, "lines": ["hi", ""],
            "scrollback": []}
    return body | changes


def snapshot_with(path, **kw):
    return ptyvisor.Client(path, timeout=10).snapshot(SID, **kw)


def async_snapshot_with(path, **kw):
    async def scenario():
        return await ptyvisor.AsyncClient(path, timeout=10).snapshot(SID, **kw)
    return asyncio.run(asyncio.wait_for(scenario(), 30))


@pytest.mark.parametrize("take", [snapshot_with, async_snapshot_with])
def test_snapshot_asks_in_version_3_and_decodes_screen(fake_daemon, take):
    path = fake_daemon(frame(28, a_screen(scrollback=["older"]), version=3))
    screen = take(path, scrollback=5)
    assert screen.lines == ["hi", ""] and screen.scrollback == ["older"]
    request = fake_daemon.requests[0]
    assert request[:4] == b"PV\x03\x1b"                 # version 3, SNAPSHOT
    assert struct.unpack(">I", request[4:8])[0] == len(request) - 8
    assert json.loads(request[8:]) == {"id": SID, "scrollback": 5}


@pytest.mark.parametrize("take", [snapshot_with, async_snapshot_with])
@pytest.mark.parametrize("reply", [
    frame(28, a_screen(lines=["hi"]), version=3),               # fewer lines than rows
    frame(28, a_screen(cursor={"row": 2, "col": 0, "visible": True}), version=3),
    frame(28, a_screen(attributes=[]), version=3),              # not asked for
    frame(28, a_screen(), version=2),                           # SCREEN is not version 2
    frame(28, b"[]", version=3),
    frame(13, {"id": SID}, version=3),                          # no reply to SNAPSHOT
], ids=["too_few_lines", "cursor_off_screen", "unasked_attributes", "screen_in_version_2",
        "not_an_object", "attached"])
def test_a_malformed_screen_is_a_protocol_error(fake_daemon, take, reply):
    with pytest.raises(errors.ProtocolError):
        take(fake_daemon(reply))


@pytest.mark.parametrize("take", [snapshot_with, async_snapshot_with])
def test_a_daemon_without_version_3_is_unsupported_version(fake_daemon, take):
    # What a daemon that speaks versions 1 and 2 answers a version 3 header (section 8).
    path = fake_daemon(frame(9, {"code": "unsupported_version",
                                 "message": "version 3 is not supported"}, version=1))
    with pytest.raises(errors.UnsupportedVersion, match="protocol version 3"):
        take(path)


@pytest.mark.parametrize("take", [snapshot_with, async_snapshot_with])
def test_a_screen_not_available_now_is_internal(fake_daemon, take):
    path = fake_daemon(frame(9, {"code": "internal", "message": "the screen worker is "
                                 "restarting"}, version=3))
    with pytest.raises(errors.Internal, match="restarting"):
        take(path)


# -- command-aware sessions (protocol section 11) -------------------------------------------

A_RECORD = {"seq": 3, "command": "true", "cwd": "/tmp", "output_start": 40, "output_end": 40,
            "exit_code": 0, "started_ms": 1, "ended_ms": 2}
REFUSES_VERSION_4 = frame(9, {"code": "unsupported_version",
                              "message": "version 4 is not supported"}, version=1)


def executed(**changes):
    body = {"id": SID, "state": "exited", "exit_code": 0, "command": A_RECORD, "offset": 60,
            "session_state": "running"}
    return frame(32, body | changes, version=4)


def exec_with(path):
    return ptyvisor.Client(path, timeout=10).exec(SID, "true", timeout=5)


def async_exec_with(path):
    async def scenario():
        return await ptyvisor.AsyncClient(path, timeout=10).exec(SID, "true", timeout=5)
    return asyncio.run(asyncio.wait_for(scenario(), 30))


@pytest.mark.parametrize("take", [exec_with, async_exec_with])
def test_exec_asks_in_version_4(fake_daemon, take):
    path = fake_daemon(executed())
    result = take(path)
    assert (result.state, result.exit_code, result.seq, result.output) == ("exited", 0, 3, b"")
    assert result.record.cwd == "/tmp" and not result.truncated
    request = fake_daemon.requests[0]
    assert request[:4] == b"PV\x04\x1f"                 # version 4, EXEC
    assert json.loads(request[8:]) == {"id": SID, "command": "true", "timeout_ms": 5000}


@pytest.mark.parametrize("call", [
    lambda c: c.exec(SID, "true"),
    lambda c: c.commands(SID),
    lambda c: c.wait(SID, for_="command"),
    lambda c: c.wait(SID, "prompt"),
    lambda c: c.watch(SID).next_event(10),
    lambda c: c.start(["bash", "-i"], shell_integration=True),
], ids=["exec", "commands", "wait_command", "wait_prompt", "watch", "start"])
def test_a_daemon_without_version_4_does_not_offer_commands(fake_daemon, call):
    path = fake_daemon(REFUSES_VERSION_4)
    with pytest.raises(errors.UnsupportedVersion, match="command-aware sessions"):
        call(ptyvisor.Client(path, timeout=10))
    assert fake_daemon.requests[0][2] == 4


def test_an_async_client_against_a_daemon_without_version_4(fake_daemon):
    path = fake_daemon(REFUSES_VERSION_4)

    async def scenario():
        return await (await ptyvisor.AsyncClient(path, timeout=10).watch(SID)).next_event()
    with pytest.raises(errors.UnsupportedVersion, match="command-aware sessions"):
        asyncio.run(asyncio.wait_for(scenario(), 30))


def test_older_requests_stay_in_version_2_unchanged(fake_daemon):
    waited = {"matched": True, "reason": "exit", "state": "exited", "offset": 7,
              "exit": {"status": "exited", "code": 0, "reason": "exited"}}
    path = fake_daemon(frame(21, waited))
    result = ptyvisor.Client(path, timeout=10).wait(SID, timeout=5)
    assert result.reason == "exit" and result.command is None
    request = fake_daemon.requests[0]
    assert request[:4] == b"PV\x02\x14"                 # version 2, WAIT
    assert json.loads(request[8:]) == {"id": SID, "for": "exit", "timeout_ms": 5000}


def test_wait_for_a_command_sends_after_and_returns_the_record(fake_daemon):
    waited = {"matched": True, "reason": "command", "state": "running", "offset": 60,
              "exit": None, "command": A_RECORD}
    path = fake_daemon(frame(21, waited, version=4))
    result = ptyvisor.Client(path, timeout=10).wait(SID, for_="command", after=2, timeout=5)
    assert result.command is not None
    assert result.command.seq == 3 and result.command.exit_code == 0
    request = fake_daemon.requests[0]
    assert request[:4] == b"PV\x04\x14"
    assert json.loads(request[8:]) == {"id": SID, "for": "command", "after": 2,
                                       "timeout_ms": 5000}


def test_list_entries_default_the_members_a_daemon_leaves_out(fake_daemon):
    bare = {"id": SID, "state": "running"}
    full = {"id": "b" * 32, "state": "running", "shell": "zsh", "at_prompt": True,
            "waiting_for_input": True, "waiting_since": 1234, "last_command": A_RECORD}
    path = fake_daemon(frame(17, {"sessions": [bare, full]}))
    old, new = list_with(path)
    assert (old.shell, old.at_prompt, old.waiting_for_input, old.waiting_since,
            old.last_command) == (None, False, False, None, None)
    assert (new.shell, new.at_prompt, new.waiting_for_input, new.waiting_since) == (
        "zsh", True, True, 1234)
    assert new.last_command.seq == 3
    assert fake_daemon.requests[0][:4] == b"PV\x02\x10"   # LIST stays in version 2


@pytest.mark.parametrize("reply", [
    executed(state="finished"),                                       # no such state
    executed(command=A_RECORD | {"output_end": 10}),                  # ends before it starts
    executed(command=A_RECORD | {"exit_code": 300}),
    executed(command="true"),
    frame(32, {"id": SID, "state": "exited"}, version=4),             # members missing
    frame(32, {"id": SID, "state": "exited", "exit_code": 0, "command": None, "offset": 1,
               "session_state": "running"}, version=3),               # EXECUTED is version 4
], ids=["state", "range", "exit_code", "record", "missing", "version_3"])
def test_a_malformed_executed_is_a_protocol_error(fake_daemon, reply):
    with pytest.raises(errors.ProtocolError):
        exec_with(fake_daemon(reply))


def test_watch_decodes_events_and_stops_after_exit(fake_daemon):
    events = (frame(34, {"event": "command_start", "offset": 5,
                         "command": A_RECORD | {"output_end": None, "exit_code": None,
                                                "ended_ms": None}}, version=4)
              + frame(34, {"event": "input", "offset": 6, "since_ms": 99}, version=4)
              + frame(34, {"event": "something_new", "offset": 6}, version=4)
              + frame(34, {"event": "exit", "offset": 7,
                           "exit": {"status": "exited", "code": 1, "reason": "exited"}},
                      version=4))
    with ptyvisor.Client(fake_daemon(events), timeout=10).watch(SID) as watch:
        seen = list(watch)
    assert [e.event for e in seen] == ["command_start", "input", "something_new", "exit"]
    assert seen[0].command is not None and seen[0].command.running
    assert seen[1].since_ms == 99 and seen[3].exit is not None and seen[3].exit.code == 1
    assert fake_daemon.requests[0][:4] == b"PV\x04\x21"


@pytest.mark.parametrize("reply", [
    frame(34, {"event": "command_end", "offset": 5}, version=4),       # without its record
    frame(34, {"event": "exit", "offset": 5}, version=4),              # without EXIT
    frame(34, {"event": "prompt", "offset": 5}, version=4),            # then closed: no exit
])
def test_a_broken_watch_is_a_typed_error(fake_daemon, reply):
    watch = ptyvisor.Client(fake_daemon(reply), timeout=10).watch(SID)
    with pytest.raises((errors.ProtocolError, errors.ConnectionLost)):
        list(watch)


# -- sandbox profiles (protocol version 6, section 13) -----------------------------------

REFUSES_VERSION_6 = frame(9, {"code": "unsupported_version",
                              "message": "version 6 is not supported"}, version=1)
STARTED = {"unit": f"ptyvisor-{SID}.service", "pid": 1, "id": SID}


def start_request(request: bytes) -> tuple[int, dict]:
    """The version and the JSON of the START the fake daemon read."""
    assert request[3] == 1
    return request[2], json.loads(request[8:8 + struct.unpack(">I", request[4:8])[0]])


@pytest.mark.parametrize("call", [
    lambda path, env: ptyvisor.Client(path, timeout=10).start(["true"], env=env, profile="p"),
    lambda path, env: ptyvisor.spawn("true", env=env, socket_path=path, profile="p"),
    lambda path, env: asyncio.run(ptyvisor.AsyncClient(path, timeout=10).start(
        ["true"], env=env, profile="p")),
], ids=["start", "spawn", "async_start"])
def test_a_daemon_without_version_6_does_not_offer_profiles(fake_daemon, session_env, call):
    path = fake_daemon(REFUSES_VERSION_6)
    with pytest.raises(errors.UnsupportedVersion, match="sandbox profiles.*version 6"):
        call(path, session_env)
    version, body = start_request(fake_daemon.requests[0])
    assert version == 6 and body["profile"] == "p"


def test_a_start_without_a_profile_keeps_its_older_version(fake_daemon, session_env):
    path = fake_daemon(frame(2, STARTED))
    ptyvisor.Client(path, timeout=10).start(["true"], env=session_env)
    path = fake_daemon(frame(2, STARTED))
    ptyvisor.Client(path, timeout=10).start(["bash", "-i"], env=session_env,
                                            shell_integration=True)
    (v_plain, plain), (v_shell, shell) = map(start_request, fake_daemon.requests)
    assert (v_plain, v_shell) == (2, 4)
    assert "profile" not in plain and "profile" not in shell


def test_a_profile_is_checked_before_anything_is_sent(session_env):
    client = ptyvisor.Client("/nonexistent/ptyvisor.sock", timeout=10)
    bad: list = ["", "x" * 65, 7]   # 7: a caller without type checks
    for profile in bad:
        with pytest.raises(ValueError):
            client.start(["true"], env=session_env, profile=profile)


def test_spawn_with_a_profile_reads_the_new_exit_reasons_and_version_5_notices(
        fake_daemon, session_env):
    """A version 6 relay may be told that a person took the terminal (CONTROLLER) and that
    input was refused (REFUSED): neither ends it. Then the profile's runtime_max ends it."""
    exit_body = {"status": "signaled", "signal": 15, "core_dumped": False,
                 "reason": "runtime-limit"}
    path = fake_daemon(frame(2, STARTED) + frame(4, b"working", version=6)
                       + frame(36, {"controller": "supervisor", "uid": 0, "since": 5,
                                    "you": False}, version=6)
                       + frame(37, {"code": "held_by_supervisor", "message": "", "what": "input",
                                    "count": 3}, version=6)
                       + frame(8, exit_body, version=6))
    child = ptyvisor.spawn("sleep 60", env=session_env, socket_path=path, timeout=10,
                           profile="short")
    assert child.expect(ptyvisor.EOF) == 0
    assert child.before == b"working"
    assert child.exit_reason == "runtime-limit" and child.signalstatus == 15
    assert child._relay.refused == 3 and child._relay.controller == "supervisor"


def test_a_version_5_notice_in_an_older_connection_is_a_protocol_error(fake_daemon, session_env):
    path = fake_daemon(frame(2, STARTED) + frame(36, {"controller": "agent", "since": 0,
                                                      "you": True}, version=5))
    with pytest.raises(errors.ProtocolError, match="version 5"):
        ptyvisor.spawn("true", env=session_env, socket_path=path, timeout=10).expect(
            ptyvisor.EOF)


def test_list_entries_carry_profile_and_typed_usage(fake_daemon):
    usage = {"cpu_usec": 1500, "memory_peak": 4096, "tasks_peak": 3, "oom_kills": 0,
             "a_later_figure": 9}
    path = fake_daemon(frame(17, {"sessions": [
        {"id": SID, "state": "running", "profile": "build", "usage": usage},
        {"id": "b" * 32, "state": "running"}]}))
    profiled, bare = list_with(path)
    assert profiled.profile == "build"
    assert profiled.usage == ptyvisor.Usage(cpu_usec=1500, memory_peak=4096, tasks_peak=3,
                                            oom_kills=0)
    assert profiled.usage.memory_current is None
    assert (bare.profile, bare.usage) == (None, None)


@pytest.mark.parametrize("entry", [
    {"profile": 3},
    {"usage": [1, 2]},
    {"usage": {"cpu_usec": -1}},
    {"usage": {"memory_peak": "4096"}},
    {"usage": {"oom_kills": True}},
    {"usage": {"tasks_peak": 2**64}},
], ids=["profile", "usage_array", "negative", "string", "bool", "over_64_bits"])
def test_a_malformed_profile_or_usage_is_a_protocol_error(fake_daemon, entry):
    path = fake_daemon(frame(17, {"sessions": [{"id": SID, "state": "running", **entry}]}))
    with pytest.raises(errors.ProtocolError):
        list_with(path)
