"""The frame codec on its own: what the daemon's hostile or broken bytes turn into."""

import pytest

from ptyvisor import protocol
from ptyvisor.errors import ProtocolError


def test_frames_split_across_feeds_are_reassembled():
    data = (protocol.encode_frame(protocol.FrameType.OUTPUT, b"ab")
            + protocol.encode_frame(protocol.FrameType.OUTPUT, b"cd"))
    decoder = protocol.FrameDecoder()
    got = []
    for i in range(len(data)):
        decoder.feed(data[i:i + 1])
        got += list(decoder.frames())
    assert got == [(4, b"ab"), (4, b"cd")]


def test_the_header_is_version_2_big_endian():
    assert protocol.encode_frame(protocol.FrameType.STOP) == b"PV\x02\x07\x00\x00\x00\x00"


@pytest.mark.parametrize("header", [
    b"XV\x02\x04\x00\x00\x00\x01",        # bad magic
    b"PV\x03\x04\x00\x00\x00\x01",        # unknown version
    b"PV\x02\x63\x00\x00\x00\x01",        # unknown type
    b"PV\x02\x04\x00\x01\x00\x01",        # OUTPUT over 64 KiB
    b"PV\x02\x04\x00\x00\x00\x00",        # empty OUTPUT
])
def test_bad_headers_are_refused_before_their_payload(header):
    decoder = protocol.FrameDecoder()
    decoder.feed(header)
    with pytest.raises(ProtocolError):
        list(decoder.frames())


def test_a_json_payload_must_be_an_object():
    with pytest.raises(ProtocolError):
        protocol.decode_json(protocol.FrameType.EXIT, b"[1]")


def test_the_environment_leaves_out_what_the_protocol_cannot_carry():
    env = {"A": "1", "": "x", "B=C": "2", "D": "nul\0", "E": "bad\udcff"}
    assert protocol.session_environment(env) == ["A=1"]
