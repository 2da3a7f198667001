#!/usr/bin/env python3
"""Drives a Python REPL on a ptyvisor terminal with expect, as one would with pexpect:
the only difference from a pexpect script is the import.

    python3 drive_repl.py"""

import sys

import ptyvisor as pexpect   # was: import pexpect

PROMPT = ">>> "


def evaluate(repl, expression: str) -> str:
    repl.sendline(expression)
    repl.expect_exact(PROMPT)
    # before holds the echoed line, then what the REPL printed
    echoed, _, printed = repl.before.partition("\r\n")
    return printed.strip()


def main() -> int:
    repl = pexpect.spawn("python3 -q", encoding="utf-8", timeout=20, dimensions=(24, 120))
    repl.expect_exact(PROMPT)

    print("2**100 =", evaluate(repl, "2**100"))
    evaluate(repl, "import math")
    print("pi =", evaluate(repl, "round(math.pi, 6)"))
    error = evaluate(repl, "1/0")
    print("1/0 ->", error.splitlines()[-1])

    repl.sendline("exit()")
    repl.expect(pexpect.EOF)
    repl.close()
    print("the REPL exited with", repl.exitstatus)
    return 0 if repl.exitstatus == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
