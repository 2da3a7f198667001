#!/usr/bin/env python3
"""An agent's way to run a test suite: start it detached in a ptyvisor session, wait for it
to finish (the session outlives this script if it is interrupted), then read what it
printed and report the result.

    python3 run_tests_in_session.py [PROJECT_DIR]

Without PROJECT_DIR it writes a small project with one passing and one failing test into a
temporary directory, so that it runs anywhere. Exits with the suite's status."""

import os
import sys
import tempfile

import ptyvisor

SAMPLE_TESTS = '''
import unittest

class Arithmetic(unittest.TestCase):
    def test_addition(self):
        self.assertEqual(1 + 1, 2)

    def test_division(self):
        self.assertEqual(7 // 2, 4)   # wrong on purpose: the agent should see it fail

if __name__ == "__main__":
    unittest.main()
'''


def sample_project() -> str:
    project = tempfile.mkdtemp(prefix="ptyvisor-example-")
    with open(os.path.join(project, "test_sample.py"), "w") as f:
        f.write(SAMPLE_TESTS)
    return project


def main() -> int:
    project = sys.argv[1] if len(sys.argv) > 1 else sample_project()
    client = ptyvisor.Client()   # $PTYVISOR_SOCKET, else /run/ptyvisor/ptyvisor.sock

    started = client.start(["python3", "-m", "unittest", "-v"], cwd=project)
    print(f"session {started.id} runs the tests in {project}")

    waited = client.wait(started.id, "exit", timeout=600)
    if waited.reason != "exit":
        print(f"still running after 600 s ({waited.reason}); killing it")
        client.kill(started.id)
        return 124

    log = client.read(started.id, offset="start", max_bytes=64 << 20)
    output = log.data.decode(errors="replace").replace("\r\n", "\n")
    failures = [line for line in output.splitlines() if line.endswith(("FAIL", "ERROR"))]
    summary = [line for line in output.splitlines() if line.startswith(("Ran ", "OK", "FAILED"))]

    print("\n".join(summary))
    for line in failures:
        print("failing:", line)
    status = waited.exit.shell_status
    print(f"exit status {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
