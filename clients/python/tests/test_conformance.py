"""The conformance corpus of protocol/conformance, through this client's decoders: every
daemon-to-client frame case (FrameDecoder), and every daemon-to-client payload case that is
not marked strict (decode_json: one object, its required members of their JSON types).
Needs no daemon. test.sh copies the corpus beside the tests; from the source tree it is
found in the repository."""

import json
from pathlib import Path

import pytest

from ptyvisor import protocol

HERE = Path(__file__).resolve().parent
CORPUS = next(p for p in (HERE / "conformance", HERE.parents[2] / "protocol" / "conformance")
              if (p / "frames.json").exists())


def cases(file, keep):
    return [pytest.param(c, id=c["name"]) for c in json.loads((CORPUS / file).read_text())["cases"]
            if keep(c)]


def from_daemon(case):
    return case["direction"] == "daemon_to_client"


@pytest.mark.parametrize("case", cases("frames.json", from_daemon))
def test_frame(case):
    data = bytes.fromhex(case["bytes"])
    if "fill" in case:
        data += bytes.fromhex(case["fill"]["byte"]) * case["fill"]["count"]
    decoder = protocol.FrameDecoder(case.get("connection_version", protocol.NEWEST_VERSION))
    decoder.feed(data)
    frames = []
    end = "need_more"
    try:
        for ftype, payload in decoder.frames():
            frames.append({"type": protocol.FrameType(ftype).name, "length": len(payload)})
    except protocol.FrameError as e:
        end = e.wire_error
    assert frames == [{"type": f["type"], "length": f["length"]} for f in case["frames"]]
    assert end == case["end"]


@pytest.mark.parametrize("case", cases("payloads.json",
                                       lambda c: from_daemon(c) and not c.get("strict")))
def test_payload(case):
    payload = (bytes.fromhex(case["payload_hex"]) if "payload_hex" in case
               else case["payload"].encode())
    ftype = protocol.FrameType[case["frame"]]
    if "error" in case:
        with pytest.raises(protocol.FrameError) as refused:
            protocol.decode_json(ftype, payload)
        assert refused.value.wire_error == case["error"]
    else:
        body = protocol.decode_json(ftype, payload)
        assert {k: body.get(k) for k in case["members"]} == case["members"]


def test_the_corpus_was_found_and_covers_every_daemon_frame_type():
    seen = {f["type"] for c in json.loads((CORPUS / "frames.json").read_text())["cases"]
            for f in c["frames"] if from_daemon(c)}
    assert seen == {t.name for t in protocol.FROM_DAEMON}
