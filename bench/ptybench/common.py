"""What every part of the suite shares: where the repository is, the account, the list of
benchmarks, their goals and constants, the log and the Failure of a sample."""
import os
import sys

# The repository: bench/ptybench/common.py is three levels below it.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACCOUNT = "ptyvisor-test"
# In run order: memory first, so that its idle numbers are those of a fresh daemon whose heap
# no earlier transfer has grown.
# The persistent-session benchmarks come next: idle-sessions measures deltas of the daemon's
# memory and wants it quiet, with no session retained from an earlier benchmark.
ALL = ["memory", "idle-sessions", "replay", "observers", "throughput", "latency", "fairness", "start", "scale", "cpu",
       "syscalls", "micro"]
REQUIRED = {"forkpty", "script", "ptyvisor", "ptyvisor-raw", "ptyvisor (CLI)"}  # contenders that must always work
PERSISTENT = {"idle-sessions", "replay", "observers"}  # benchmarks whose every failure fails the run
# The goals of persistent sessions (docs/performance.md, "Persistent sessions").
GOAL_REPLAY_MS = 20.0
GOAL_OBSERVER_RATIO = 0.9
GOAL_IDLE_KIB = 16.0
GOAL_LIST_MS = 20.0
OBSERVERS = 8
FLOODS = 15  # fairness: sessions flooding output while a person types in one more
TYPED = "stty raw -echo; echo READY; exec cat"  # the 16th session, typed into
TEXT_LINE = "some text line"


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class Failure(Exception):
    pass
