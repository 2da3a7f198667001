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


# -- SCREEN (protocol 10.3), decoded on its own ------------------------------------------

SID = "0123456789abcdef0123456789abcdef"


def a_screen(**changes):
    """A valid SCREEN of 3 rows by 10 columns, with `changes` applied (None removes)."""
    body = {"id": SID, "cols": 10, "rows": 3,
            "cursor": {"row": 1, "col": 2, "visible": True}, "alternate": False,
            "title": "vim", "offset": 1234, "lines": ["$ ls", "a  b", ""],
            "scrollback": ["older", "newer"],
            "attributes": [{"row": 0, "col": 0, "width": 2, "bold": True, "fg": 1,
                            "bg": "#102030"},
                           {"row": 0, "col": 2, "width": 8, "underline": 3},
                           {"row": 2, "col": 9, "width": 1, "reverse": True}]}
    for name, value in changes.items():
        if value is None:
            body.pop(name)
        else:
            body[name] = value
    return body


def decode_screen(body, scrollback=10, attributes=True):
    return protocol.Screen.from_payload(body, SID, scrollback, attributes)


def test_a_valid_screen_is_decoded():
    screen = decode_screen(a_screen())
    assert screen.cursor == (1, 2, True) and screen.cursor.col == 2
    assert screen.lines == ["$ ls", "a  b", ""] and screen.text() == "$ ls\na  b\n"
    assert screen.text(scrollback=True) == "older\nnewer\n$ ls\na  b\n"
    assert screen.attributes[0] == protocol.AttributeRun(row=0, col=0, width=2, bold=True,
                                                         fg=1, bg="#102030")
    assert screen.attributes[1].underline == 3 and screen.attributes[2].reverse
    assert (screen.title, screen.offset, screen.alternate) == ("vim", 1234, False)


def test_unknown_members_are_ignored():
    body = a_screen(future=1)
    body["cursor"]["shape"] = "block"
    body["attributes"][0]["overline"] = True
    assert decode_screen(body).cursor == (1, 2, True)


def run(**members):
    return [{"row": 0, "col": 0, "width": 1, "bold": True} | members]


@pytest.mark.parametrize("changes", [
    {"id": "f" * 32},                                    # another session than asked for
    {"cols": 0}, {"rows": 65536}, {"rows": "3"}, {"cols": 10.0},
    {"cols": 1001, "rows": 1000, "lines": [""] * 1000},  # over 1000000 cells
    {"lines": ["one", "two"]},                           # fewer lines than rows
    {"lines": ["", "", "", ""]},                         # more lines than rows
    {"lines": ["", 1, ""]},
    {"lines": "$ ls"},
    {"lines": None},
    {"lines": ["\x1b[31mred", "", ""]},                  # a control character in a row
    {"lines": ["bell\x07", "", ""]},
    {"lines": ["del\x7f", "", ""]},
    {"lines": ["\ud800", "", ""]},                       # a lone surrogate: not UTF-8
    {"scrollback": ["\r"]},
    {"scrollback": ["x"] * 11},                          # more than asked for
    {"scrollback": None},
    {"cursor": {"row": 3, "col": 0, "visible": True}},   # below the last row
    {"cursor": {"row": 0, "col": 10, "visible": True}},  # right of the last column
    {"cursor": {"row": -1, "col": 0, "visible": True}},
    {"cursor": {"row": 0, "col": 0, "visible": 1}},
    {"cursor": {"row": 0, "col": 0}},
    {"cursor": [0, 0, True]},
    {"alternate": "no"}, {"alternate": None},
    {"title": 5}, {"title": "t" * 1025}, {"title": None}, {"title": "a\0b"},
    {"title": "\udcff"},
    {"offset": -1}, {"offset": 2**64}, {"offset": None},
    {"attributes": None},                                # asked for, missing
    {"attributes": {"row": 0}},
    {"attributes": [5]},
    {"attributes": run(row=3)},                          # below the screen
    {"attributes": run(col=10)},                         # right of it
    {"attributes": run(col=5, width=6)},                 # col + width > cols
    {"attributes": run(width=0)},
    {"attributes": run(bold=None)},                      # all defaults
    {"attributes": run(bold="yes")},
    {"attributes": run(underline=4)},
    {"attributes": run(underline=True)},
    {"attributes": run(fg=256)}, {"attributes": run(fg=-1)}, {"attributes": run(fg="red")},
    {"attributes": run(bg="#12345")}, {"attributes": run(bg="#1234567")},
    {"attributes": run(fg=True)},
    {"attributes": run() + run()},                       # the same cell twice
    {"attributes": run(width=3) + run(col=2)},           # overlapping
    {"attributes": run(row=1) + run(row=0)},             # out of order
])
def test_a_malformed_screen_is_refused(changes):
    with pytest.raises(ProtocolError):
        decode_screen(a_screen(**changes))


def test_attributes_that_were_not_asked_for_are_refused():
    with pytest.raises(ProtocolError):
        decode_screen(a_screen(), attributes=False)
    assert decode_screen(a_screen(attributes=None), attributes=False).attributes is None


def test_without_a_request_the_decoder_takes_a_screen_with_or_without_attributes():
    attributes = protocol.Screen.from_payload(a_screen()).attributes
    assert attributes is not None and len(attributes) == 3
    assert protocol.Screen.from_payload(a_screen(attributes=None)).attributes is None
    assert protocol.Screen.from_payload(a_screen(title="\u00e9t\u00e9")).title == "été"


def test_snapshot_and_screen_belong_to_version_3():
    snapshot = protocol.encode_json_frame(protocol.FrameType.SNAPSHOT, {"id": SID},
                                          protocol.SCREEN_VERSION)
    assert snapshot[:4] == b"PV\x03\x1b"
    payload = b"{}"
    screen = protocol.encode_frame(protocol.FrameType.SCREEN, payload, version=3)
    decoder = protocol.FrameDecoder(version=3)
    decoder.feed(screen)
    assert list(decoder.frames()) == [(28, payload)]
    # A version 1 ERROR (what the daemon writes before it has read a frame) is read too.
    decoder.feed(b"PV\x01\x09\x00\x00\x00\x02{}")
    assert list(decoder.frames()) == [(9, b"{}")]


@pytest.mark.parametrize("version, header", [
    (2, b"PV\x03\x1c\x00\x00\x00\x02"),     # a version 3 frame in a version 2 connection
    (3, b"PV\x02\x1c\x00\x00\x00\x02"),     # SCREEN does not exist in version 2
    (3, b"PV\x03\x1c\x00\x80\x00\x01"),     # SCREEN over 8 MiB
    (3, b"PV\x03\x1c\x00\x00\x00\x01"),     # SCREEN under 2 bytes
    (3, b"PV\x04\x1c\x00\x00\x00\x02"),     # version 4
    (3, b"PV\x03\x1d\x00\x00\x00\x02"),     # type 29
])
def test_screen_headers_are_checked_against_the_connections_version(version, header):
    decoder = protocol.FrameDecoder(version)
    decoder.feed(header)
    with pytest.raises(ProtocolError):
        list(decoder.frames())


@pytest.mark.parametrize("scrollback, attributes, expected", [
    (0, False, {"id": SID}),
    (10000, True, {"id": SID, "scrollback": 10000, "attributes": True}),
])
def test_the_snapshot_request(scrollback, attributes, expected):
    assert protocol.snapshot_body(SID, scrollback, attributes) == expected
