"""Sandbox profiles (protocol version 6, section 13) against the real daemon, configured by
with-daemon.toml: "roomy" and "short" (runtime_max = 1) are allowed, "forbidden" is not."""

import asyncio

import pytest

import ptyvisor
from ptyvisor import errors


def listed(client, session_id):
    return {s.id: s for s in client.list()}[session_id]


def test_a_start_with_an_allowed_profile_lists_its_profile(client, session_env):
    started = client.start(["sh", "-c", "echo ready; sleep 60"], env=session_env,
                           profile="roomy")
    try:
        client.wait(started.id, "text", pattern="ready", timeout=10)
        entry = listed(client, started.id)
        assert entry.profile == "roomy"
        # Which figures a host counts depends on its cgroups (13.3): typed when present.
        assert entry.usage is None or isinstance(entry.usage, ptyvisor.Usage)
    finally:
        client.kill(started.id)


def test_a_start_without_a_profile_lists_none(client, session_env):
    started = client.start(["sleep", "60"], env=session_env)
    try:
        assert listed(client, started.id).profile is None
    finally:
        client.kill(started.id)


def test_an_async_start_with_a_profile_lists_it(session_env):
    async def scenario():
        client = ptyvisor.AsyncClient()
        started = await client.start(["sleep", "60"], env=session_env, profile="roomy")
        try:
            return {s.id: s for s in await client.list()}[started.id]
        finally:
            await client.kill(started.id)
    assert asyncio.run(asyncio.wait_for(scenario(), 60)).profile == "roomy"


@pytest.mark.parametrize("name", ["forbidden", "no-such-profile"])
def test_a_forbidden_profile_raises_profile_not_allowed(client, session_env, name):
    # An unknown name and a forbidden one get the same answer (13.1), naming the allowed ones.
    with pytest.raises(errors.ProfileNotAllowed) as raised:
        client.start(["true"], env=session_env, profile=name)
    assert raised.value.code == "profile_not_allowed"
    assert "roomy" in raised.value.message


def test_spawn_with_a_forbidden_profile_raises_profile_not_allowed(session_env):
    with pytest.raises(errors.ProfileNotAllowed):
        ptyvisor.spawn("true", env=session_env, profile="forbidden")


def test_runtime_max_ends_a_spawned_session_with_runtime_limit(session_env):
    # spawn's connection speaks version 6 (it named a profile), so its EXIT says which limit
    # ended the session.
    child = ptyvisor.spawn("sleep 60", env=session_env, profile="short", timeout=30)
    try:
        assert child.expect(ptyvisor.EOF) == 0
        assert child.exit_reason == "runtime-limit"
        assert child.terminated
    finally:
        child.close()


def test_runtime_max_is_timeout_to_an_older_connection(client, session_env):
    # WAIT speaks version 2: the daemon tells it the reason it knows (13.2).
    started = client.start(["sleep", "60"], env=session_env, profile="short")
    waited = client.wait(started.id, timeout=30)
    assert waited.reason == "exit"
    assert waited.exit.reason == "timeout"
    assert listed(client, started.id).profile == "short"
