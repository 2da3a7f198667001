"""The session calls through asyncio (AsyncClient), against the same daemon."""

import asyncio
import signal

import pytest

import ptyvisor
from ptyvisor import errors


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_start_wait_read(session_env):
    async def scenario():
        client = ptyvisor.AsyncClient()
        started = await client.start(["sh", "-c", "echo async; exit 4"], env=session_env)
        waited = await client.wait(started.id, timeout=10)
        log = await client.read(started.id)
        sessions = await client.list()
        return started, waited, log, sessions
    started, waited, log, sessions = run(scenario())
    assert waited.exit.code == 4
    assert log.data == b"async\r\n"
    assert started.id in [s.id for s in sessions]


def test_attach_controller_send_and_exit(session_env):
    async def scenario():
        client = ptyvisor.AsyncClient()
        started = await client.start(["sh", "-c", "read a; read b; echo $a$b"], env=session_env)
        assert await client.send(started.id, "x\n") == 2
        async with await client.attach(started.id, offset="start") as attached:
            await attached.write("y\n")
            out = b"".join([chunk async for chunk in attached])
            return out, attached.exit
    out, exit = run(scenario())
    assert b"xy" in out and exit.code == 0


def test_wait_for_text_and_kill(session_env):
    async def scenario():
        client = ptyvisor.AsyncClient()
        started = await client.start(["sh", "-c", "sleep 0.2; echo listening; sleep 60"],
                                     env=session_env)
        waited = await client.wait(started.id, "text", pattern="listen(ing)", timeout=10)
        killed = await client.kill(started.id, signal.SIGKILL)
        final = await client.wait(started.id, timeout=10)
        return waited, killed, final
    waited, killed, final = run(scenario())
    assert waited.matched and waited.reason == "text"
    assert final.exit.signal == signal.SIGKILL


def test_observer_detach(session_env):
    async def scenario():
        client = ptyvisor.AsyncClient()
        started = await client.start(["sh", "-c", "echo hi; sleep 60"], env=session_env)
        observer = await client.attach(started.id, role="observer", offset="start")
        first = await observer.read()
        offset = await observer.detach()
        await client.kill(started.id)
        return first, offset
    first, offset = run(scenario())
    assert first.startswith(b"hi") and isinstance(offset, int)


def test_errors_are_typed():
    async def scenario():
        client = ptyvisor.AsyncClient()
        await client.read("f" * 32)
    with pytest.raises(errors.NoSuchSession):
        run(scenario())
