"""Fixtures shared by the suites. They talk to the daemon named by PTYVISOR_SOCKET (test.sh
runs them through scripts/with-daemon.sh); without one they fail rather than skip."""

import os
import shutil

import pytest

import ptyvisor

# The PATH the sessions search; the account's own may hold directories it cannot read.
SESSION_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture(scope="session", autouse=True)
def daemon_socket():
    path = os.environ.get("PTYVISOR_SOCKET")
    assert path and os.path.exists(path), \
        "PTYVISOR_SOCKET must name a running ptyvisord: run clients/python/test.sh"
    return path


@pytest.fixture
def client():
    return ptyvisor.Client()


@pytest.fixture
def session_env():
    env = dict(os.environ)
    env["PATH"] = SESSION_PATH
    return env


@pytest.fixture
def python3():
    return shutil.which("python3", path=SESSION_PATH)
