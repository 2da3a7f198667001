"""The README's examples run as a user would run them, and print what they promise."""

import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def run_example(name, session_env, *args):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args],
                          env=session_env, capture_output=True, text=True, timeout=120)


def test_run_tests_in_session_reports_the_failing_test(session_env):
    result = run_example("run_tests_in_session.py", session_env)
    assert result.returncode == 1, result.stderr
    assert "Ran 2 tests" in result.stdout
    assert "failing: test_division" in result.stdout
    assert "exit status 1" in result.stdout


def test_run_tests_in_session_on_a_passing_project(session_env, tmp_path):
    (tmp_path / "test_ok.py").write_text(
        "import unittest\nclass T(unittest.TestCase):\n    def test_ok(self): pass\n")
    result = run_example("run_tests_in_session.py", session_env, str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout and "exit status 0" in result.stdout


def test_drive_repl(session_env):
    result = run_example("drive_repl.py", session_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2**100 = 1267650600228229401496703205376" in result.stdout
    assert "pi = 3.141593" in result.stdout
    assert "1/0 -> ZeroDivisionError: division by zero" in result.stdout
    assert "the REPL exited with 0" in result.stdout
