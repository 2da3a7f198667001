#!/usr/bin/env python3
"""Writes the checked-in seed corpus of the fuzz targets: fuzz/corpus/<target>/<name>.

Run it again after changing the protocol; the files it writes are committed. Each target gets
a handful of small valid inputs (so that the fuzzer starts from the interesting shapes) and
invalid ones (each decoder's refusal paths).
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# Type numbers, versions and bounds come from the protocol's description, as every copy does.
with open(os.path.join(HERE, "..", "protocol", "protocol.json")) as f:
    SPEC = json.load(f)
TYPES = {t["name"]: t for t in SPEC["frame_types"]}
(START, STARTED, INPUT, OUTPUT, RESIZE, SIGNAL, STOP, EXIT, ERROR, STATUS_REQUEST, STATUS, ATTACH,
 DETACH, SNAPSHOT) = (TYPES[n]["number"] for n in ("START", "STARTED", "INPUT", "OUTPUT", "RESIZE", "SIGNAL",
                                                   "STOP", "EXIT", "ERROR", "STATUS_REQUEST", "STATUS",
                                                   "ATTACH", "DETACH", "SNAPSHOT"))
NEWEST_VERSION = SPEC["versions"][-1]["number"]


def frame(ftype, payload=b"", version=1, magic=b"PV", length=None):
    if isinstance(payload, str):
        payload = payload.encode()
    n = len(payload) if length is None else length
    return magic + bytes([version, ftype]) + struct.pack(">I", n) + payload


def js(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


start_ok = {"argv": ["bash", "-l"], "env": ["TERM=xterm", "HOME=/home/a"], "cwd_dev": 2049,
            "cwd_ino": 131073, "term": "xterm-256color", "rows": 24, "cols": 80}
started_ok = {"unit": "ptyvisor-0123456789abcdef0123456789abcdef.service", "pid": 4242}
resize_ok = {"rows": 50, "cols": 132}
signal_ok = {"signal": 2, "target": "foreground"}
exit_ok = {"status": "exited", "code": 0, "unit_result": "success", "reason": "exited"}
exit_sig = {"status": "signaled", "signal": 9, "core_dumped": False, "unit_result": "signal",
            "reason": "stopped"}
error_ok = {"code": "busy", "message": "no session slot is free"}
status_session = {"unit": "ptyvisor-3f1c0e9a2b7d4c58a6e0f1d2c3b4a596.service", "pid": 4242,
                  "peer_pid": 1234, "started_at": 1718000000, "bytes_in": 512, "bytes_out": 65536,
                  "argv0": "bash"}
status_counters = {"accepted": 57, "rejected": {"not_allowed": 3, "busy": 1}, "rate_limited": 0,
                   "handshake_timeouts": 2, "evicted": 0}
status_ok = {"version": "0.1.0", "backend": "systemd", "sessions": [status_session],
             "counters": status_counters}

payloads = {
    "fuzz_start": {
        "valid": js(start_ok),
        "valid_minimal": js({"argv": ["sh"], "env": [], "cwd_dev": 0, "cwd_ino": 0,
                             "rows": 1, "cols": 1}),
        "valid_unicode": js({**start_ok, "argv": ["echo", "h\u00e9llo \u2603"], "future": 1}),
        "empty_argv": js({**start_ok, "argv": []}),
        "bad_env": js({**start_ok, "env": ["NOEQUALS"]}),
        "nul_in_argv": b'{"argv":["a\\u0000b"],"env":[],"cwd_dev":1,"cwd_ino":1,"rows":1,"cols":1}',
        "rows_zero": js({**start_ok, "rows": 0}),
        "nested": js({**start_ok, "argv": [["x"]]}),
        "not_object": b'["argv"]',
        "truncated": js(start_ok)[:40],
    },
    "fuzz_started": {
        "valid": js(started_ok),
        "pid_zero": js({"unit": "u", "pid": 0}),
        "pid_negative": js({"unit": "u", "pid": -1}),
        "pid_huge": b'{"unit":"u","pid":18446744073709551615}',
        "missing_unit": js({"pid": 1}),
        "invalid": b'{"unit":"u",',
    },
    "fuzz_resize": {
        "valid": js(resize_ok),
        "max": js({"rows": 65535, "cols": 65535}),
        "rows_over": js({"rows": 65536, "cols": 80}),
        "float": b'{"rows":24.0,"cols":80}',
        "string": js({"rows": "24", "cols": 80}),
        "empty_object": b"{}",
        "deep": b'{"rows":24,"cols":80,"x":[[[[1]]]]}',
    },
    "fuzz_signal": {
        "valid": js(signal_ok),
        "session": js({"signal": 15, "target": "session"}),
        "default_target": js({"signal": 64}),
        "zero": js({"signal": 0}),
        "over": js({"signal": 65}),
        "bad_target": js({"signal": 2, "target": "group"}),
        "number_string": b'{"signal":"2"}',
    },
    "fuzz_exit": {
        "exited": js(exit_ok),
        "signaled": js(exit_sig),
        "core": js({**exit_sig, "signal": 11, "core_dumped": True, "unit_result": "core-dump"}),
        "unknown": js({"status": "unknown", "reason": "client_stalled", "unit_result": ""}),
        "code_over": js({**exit_ok, "code": 256}),
        "bad_reason": js({**exit_ok, "reason": "killed"}),
        "missing_core": js({"status": "signaled", "signal": 9, "reason": "exited"}),
    },
    "fuzz_error": {
        "valid": js(error_ok),
        "unknown_code": js({"code": "from_the_future", "message": "m"}),
        "escapes": b'{"code":"bad_frame","message":"\\u00e9\\ud83d\\ude00\\n"}',
        "nul": b'{"code":"busy","message":"a\\u0000b"}',
        "bad_utf8": b'{"code":"busy","message":"\xff\xfe"}',
        "missing_message": js({"code": "busy"}),
        "number": b"42",
    },
    "fuzz_status": {
        "valid": js(status_ok),
        "empty": js({**status_ok, "sessions": [], "counters": {**status_counters, "rejected": {}}}),
        "truncated": js({**status_ok, "sessions": [], "truncated": True}),
        "future_members": js({**status_ok, "uptime": 5, "x": {"y": 1},
                              "sessions": [{**status_session, "cgroup": "/x"}]}),
        "missing_counters": js({k: v for k, v in status_ok.items() if k != "counters"}),
        "session_not_object": js({**status_ok, "sessions": [1]}),
        "pid_over": js({**status_ok, "sessions": [{**status_session, "pid": 2147483648}]}),
        "rejected_string": js({**status_ok, "counters": {**status_counters, "rejected": {"busy": "1"}}}),
        "too_deep": js({**status_ok, "sessions": [{**status_session, "x": [[1]]}]}),
    },
}

session = (frame(START, js(start_ok)) + frame(INPUT, "ls\r") + frame(RESIZE, js(resize_ok)) +
           frame(SIGNAL, js(signal_ok)) + frame(STOP))
server = (frame(STARTED, js(started_ok)) + frame(OUTPUT, "hello\r\n") + frame(EXIT, js(exit_ok)))

# fuzz_frame_decoder: two bytes choose the split plan, the rest is the stream.
streams = {
    "client_session_bytewise": b"\x00\x01" + session,
    "client_session_whole": b"\x07\x00" + session,
    "server_session_8": b"\x04\x10" + server,
    "error_frame": b"\x06\x33" + frame(ERROR, js(error_ok)),
    "status_request_and_reply": b"\x02\x02" + frame(STATUS_REQUEST) + frame(STATUS, js(status_ok)),
    "stop": b"\x05\x00" + frame(STOP),
    "bad_magic": b"\x07\x00" + frame(STOP, magic=b"XV"),
    "bad_version": b"\x07\x00" + frame(STOP, version=NEWEST_VERSION + 1),
    "unknown_type": b"\x07\x00" + frame(SNAPSHOT, version=2),
    "v2_type_in_v1": b"\x07\x00" + frame(ATTACH),
    "v2_attach_session": b"\x07\x00" + frame(ATTACH, js({"id": "0" * 32, "from": "start", "role": "observer"}),
                                                version=2)
    + frame(DETACH, version=2),
    "too_big_input": b"\x07\x00" + frame(INPUT, length=TYPES["INPUT"]["max_payload"] + 1),
    "empty_input": b"\x07\x00" + frame(INPUT),
    "truncated_start": b"\x03\x99" + frame(START, js(start_ok))[:30],
    "good_then_bad": b"\x01\x42" + frame(INPUT, "x") + frame(STOP, length=1) + frame(STOP),
}


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


for target, seeds in payloads.items():
    for name, data in seeds.items():
        write(target, name, data)
for name, data in streams.items():
    write("fuzz_frame_decoder", name, data)

# fuzz_session_payloads: the first byte picks the decoder (see fuzz_session_payloads.cpp).
SID = "0123456789abcdef0123456789abcdef"
exit_ok = {"status": "exited", "code": 0, "reason": "exited", "unit_result": ""}
RECORD = {"seq": 4, "command": "echo héllo", "cwd": "/tmp", "output_start": 10, "output_end": 20, "exit_code": 0,
          "started_ms": 1700000000000, "ended_ms": 1700000000005}
session_seeds = {
    "attach": (0, js({"id": SID, "from": 1234, "role": "controller", "takeover": True})),
    "attached": (1, js({"id": SID, "unit": "ptyvisor-%s.service" % SID, "pid": 42, "role": "observer", "start": 0,
                        "end": 10, "offset": 0, "state": "running", "size": {"cols": 80, "rows": 24}})),
    "detached": (2, js({"offset": 7, "reason": "taken_over"})),
    "sessions": (3, js({"sessions": [{"id": SID, "unit": "u", "argv": ["sh"], "cwd": "/", "state": "exited",
                                      "exit": exit_ok, "pid": 1, "start": 0, "offset": 5, "clients": 0,
                                      "created": 1, "detached": True}]})),
    "read": (4, js({"id": SID, "from": "tail", "max_bytes": 10})),
    "log": (5, js({"id": SID, "start": 0, "offset": 0, "length": 3, "end": 3, "state": "exited", "exit": exit_ok})),
    "wait_text": (6, js({"id": SID, "for": "text", "pattern": "listening on [0-9]+", "from": "start",
                         "timeout_ms": 1000})),
    "wait_quiet": (6, js({"id": SID, "for": "quiet", "quiet_ms": 500})),
    "waited": (7, js({"matched": True, "reason": "text", "state": "running", "exit": None, "offset": 9,
                      "match_start": 1, "match_end": 4})),
    "kill": (8, js({"id": SID, "signal": 15})),
    "killed": (9, js({"id": SID, "state": "exited", "exit": exit_ok})),
    "sent": (10, js({"bytes": 6})),
    "dropped": (11, js({"offset": 100, "lost": 50})),
    "send": (12, SID.encode() + b"ls\r"),
    "send_bad_id": (12, b"Z" * 32 + b"x"),
    "wait_bad_for": (6, js({"id": SID, "for": "never"})),
    "attach_nested": (0, js({"id": SID, "from": [1]})),
    # Version 4.
    "wait_command": (6, js({"id": SID, "for": "command", "after": 3})),
    "commands": (13, js({"id": SID, "since": 2})),
    "command_list": (14, js({"id": SID, "shell": "bash", "at_prompt": True, "waiting_for_input": False,
                             "current": None, "first_seq": 1, "commands": [RECORD]})),
    "exec": (15, js({"id": SID, "command": "make -j2 test", "timeout_ms": 5000, "interrupt": True})),
    "exec_two_lines": (15, js({"id": SID, "command": "true\nrm -rf ~"})),
    "executed": (16, js({"id": SID, "state": "waiting_for_input", "exit_code": None, "command": RECORD,
                         "offset": 99, "session_state": "running"})),
    "watch": (17, js({"id": SID})),
    "event_end": (18, js({"event": "command_end", "offset": 50, "command": RECORD})),
    "event_input": (18, js({"event": "input", "offset": 50, "since_ms": 1700000000000})),
    "record": (19, js(RECORD)),
    # Version 5.
    "control": (20, js({"take": True})),
    "controller": (21, js({"controller": "supervisor", "uid": 1001, "since": 1700000000000, "you": False})),
    "refused": (22, js({"code": "held_by_supervisor", "message": "a person holds it", "what": "input", "count": 3})),
    "recording": (23, js({"id": SID, "offset": 100, "max_bytes": 4096})),
    "recording_path": (23, js({"id": "../../../etc/shadow"})),
    "cast": (24, js({"id": SID, "offset": 0, "length": 10, "size": 500})),
    "sessions_v5": (3, js({"sessions": [{"id": SID, "unit": "u", "argv": ["sh"], "cwd": "/", "state": "running",
                                         "exit": None, "pid": 1, "start": 0, "offset": 5, "clients": 2,
                                         "created": 1, "detached": True, "controller": "supervisor",
                                         "controller_uid": 1001, "controller_since": 1700000000000,
                                         "recording": True}], "role": "supervisor"})),
}
for name, (which, data) in session_seeds.items():
    write("fuzz_session_payloads", name, bytes([which]) + data)
