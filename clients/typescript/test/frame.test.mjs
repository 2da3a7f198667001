// Framing (protocol section 2): frames split across reads or joined in one are reassembled;
// a bad header is refused before any of its payload is buffered.
import { test } from "node:test";
import assert from "node:assert/strict";
import { encodeFrame, FrameDecoder, FrameType, ProtocolError, SCREEN_PROTOCOL_VERSION } from "ptyvisor";

const header = (version, type, length) => Buffer.from([0x50, 0x56, version, type, length >>> 24, (length >>> 16) & 255, (length >>> 8) & 255, length & 255]);

test("the worked examples of the protocol encode to its bytes", () => {
  const hex = (b) => b.toString("hex");
  assert.equal(hex(encodeFrame(FrameType.STOP)), "5056020700000000");
  assert.equal(hex(encodeFrame(FrameType.INPUT, Buffer.from("ls\r"))), "50560203000000036c730d");
});

/** OUTPUT comes in pieces; joins consecutive pieces so that frames can be compared. */
function joinOutput(frames) {
  const out = [];
  for (const f of frames) {
    const last = out[out.length - 1];
    if (f.type === FrameType.OUTPUT && last?.type === FrameType.OUTPUT) last.payload = Buffer.concat([last.payload, f.payload]);
    else out.push({ type: f.type, payload: f.payload });
  }
  return out;
}

test("frames split at every byte, and joined in one chunk, come out whole", () => {
  const output = Buffer.alloc(65536, 7);
  const exit = encodeFrame(FrameType.EXIT, Buffer.from('{"status":"exited","code":0,"reason":"exited"}'));
  const stream = Buffer.concat([encodeFrame(FrameType.OUTPUT, output), exit]);
  const split = new FrameDecoder();
  const pieces = [];
  for (let i = 0; i < stream.length; i++) pieces.push(...split.push(stream.subarray(i, i + 1)));
  const joined = new FrameDecoder().push(stream);
  assert.equal(joined.length, 2, "one read: one OUTPUT piece and the EXIT");
  for (const got of [joinOutput(pieces), joinOutput(joined)]) {
    assert.deepEqual(got.map((f) => f.type), [FrameType.OUTPUT, FrameType.EXIT]);
    assert.ok(got[0].payload.equals(output));
    assert.match(got[1].payload.toString(), /"exited"/);
  }
});

test("OUTPUT is passed on as it arrives, before its frame is complete", () => {
  const frame = encodeFrame(FrameType.OUTPUT, Buffer.from("hello world"));
  const decoder = new FrameDecoder();
  const first = decoder.push(frame.subarray(0, 13));
  assert.deepEqual(first.map((f) => f.payload.toString()), ["hello"]);
  const rest = decoder.push(frame.subarray(13));
  assert.deepEqual(rest.map((f) => f.payload.toString()), [" world"]);
});

test("a version 1 frame is accepted (the server's ERROR before negotiation)", () => {
  const body = Buffer.from('{"code":"overloaded","message":"x"}');
  const [frame] = new FrameDecoder().push(Buffer.concat([header(1, FrameType.ERROR, body.length), body]));
  assert.equal(frame.type, FrameType.ERROR);
});

test("bad headers are refused in the protocol's order, before their payload", () => {
  const refuse = (bytes, re) => assert.throws(() => new FrameDecoder().push(bytes), (e) => e instanceof ProtocolError && re.test(e.message));
  refuse(Buffer.from("GET / HTTP/1.1\r\n"), /magic/);
  refuse(header(3, FrameType.OUTPUT, 1), /version/);
  refuse(header(2, 27, 2), /unknown type/);
  refuse(header(2, 0, 2), /unknown type/);
  refuse(header(2, FrameType.OUTPUT, 65537), /too big/);
  refuse(header(2, FrameType.STATUS, 0xffffffff), /too big/);
  refuse(header(2, FrameType.EXIT, 1), /length 1 < 2/);
  refuse(header(2, FrameType.OUTPUT, 0), /length 0 < 1/);
});

test("SNAPSHOT is sent in version 3, and a version 3 connection reads SCREEN and older frames", () => {
  assert.equal(SCREEN_PROTOCOL_VERSION, 3);
  assert.equal(encodeFrame(FrameType.SNAPSHOT, Buffer.from("{}"), 3).toString("hex"), "5056031b000000027b7d");
  const screen = Buffer.from('{"lines":[]}');
  const error = Buffer.from('{"code":"unsupported_version","message":"x"}');
  const frames = new FrameDecoder(3).push(Buffer.concat([header(3, FrameType.SCREEN, screen.length), screen, header(1, FrameType.ERROR, error.length), error]));
  assert.deepEqual(frames.map((f) => f.type), [FrameType.SCREEN, FrameType.ERROR]);
  // SCREEN's bound is 8 MiB (section 10.1): the header alone says whether it is too big.
  assert.deepEqual(new FrameDecoder(3).push(header(3, FrameType.SCREEN, 8 * 1024 * 1024)), []);
  assert.throws(() => new FrameDecoder(3).push(header(3, FrameType.SCREEN, 8 * 1024 * 1024 + 1)), /too big/);
});

test("frame types 27 and 28 are unknown in versions 1 and 2; version 4 is not spoken", () => {
  const refuse = (decoder, bytes, re) => assert.throws(() => decoder.push(bytes), (e) => e instanceof ProtocolError && re.test(e.message));
  refuse(new FrameDecoder(3), header(2, FrameType.SCREEN, 2), /unknown type 28 in version 2/);
  refuse(new FrameDecoder(3), header(1, FrameType.ATTACHED, 2), /unknown type 13 in version 1/);
  refuse(new FrameDecoder(2), header(3, FrameType.SCREEN, 2), /version 3/);
  refuse(new FrameDecoder(3), header(4, FrameType.ERROR, 2), /version 4/);
  refuse(new FrameDecoder(3), header(3, 29, 2), /unknown type 29/);
});
