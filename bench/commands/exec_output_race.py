#!/usr/bin/env python3
"""exec_output_race.py: how often EXEC answers waiting_for_input for a command that has ended.

Runs `head -c SIZE /dev/zero | tr '\\0' x` five times per size in one session of bash and of
zsh; for each EXEC that does not answer `exited`, prints what COMMANDS said right after and
the record's real end (WAIT for:"command"). See docs/commands.md, "EXEC against sh -c", row 6.

Run as the agent's account against a daemon: scripts/with-daemon.sh -- python3 THIS
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

for shell in ("bash", "zsh"):
    sid = wire.start([shell], wire.session_env())
    wire.wait(sid, **{"for": "prompt", "timeout_ms": 15000})
    for size in (65536, 262144, 1048576):
        states = []
        for i in range(5):
            t0 = time.monotonic()
            r = wire.exec_command(sid, f"head -c {size} /dev/zero | tr '\\0' x", timeout_ms=30000)
            ms = (time.monotonic()-t0)*1000
            extra = ""
            if r["state"] != "exited":
                rec = r["command"]
                seen = wire.commands(sid)
                w = wire.wait(sid, **{"for": "command", "after": rec["seq"]-1, "timeout_ms": 10000})
                extra = f"(at reply: at_prompt={seen['at_prompt']} wfi={seen['waiting_for_input']} current={'yes' if seen['current'] else 'no'}; then {w['reason']} exit={w['command']['exit_code']} ended_ms-started_ms={w['command']['ended_ms']-w['command']['started_ms']})"
                wire.wait(sid, **{"for": "prompt", "timeout_ms": 5000})
            states.append(f"{r['state']}@{ms:.0f}ms{extra}")
        print(shell, size, states)
    wire.kill(sid)
