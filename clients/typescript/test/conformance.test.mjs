// The conformance corpus of protocol/conformance, through this client's decoders: every
// daemon-to-client frame case (FrameDecoder), and every daemon-to-client payload case that is
// not marked strict (parseJsonObject: one object, its required members of their JSON types).
// Needs no daemon. test.sh copies the corpus beside the tests; from the source tree it is
// found in the repository.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { FROM_DAEMON, FrameDecoder, FrameError, FrameType, NEWEST_VERSION, parseJsonObject } from "ptyvisor";

const here = dirname(fileURLToPath(import.meta.url));
const corpus = [join(here, "conformance"), join(here, "..", "..", "..", "protocol", "conformance")].find((d) =>
  existsSync(join(d, "frames.json")),
);
assert.ok(corpus, "the conformance corpus is neither beside the tests nor in the repository");
const load = (file) => JSON.parse(readFileSync(join(corpus, file), "utf8")).cases;
const NAMES = new Map(Object.entries(FrameType).map(([name, n]) => [n, name]));
const fromDaemon = (c) => c.direction === "daemon_to_client";

for (const c of load("frames.json").filter(fromDaemon)) {
  test(`frame: ${c.name}`, () => {
    let bytes = Buffer.from(c.bytes.replaceAll(" ", ""), "hex");
    if (c.fill) bytes = Buffer.concat([bytes, Buffer.alloc(c.fill.count, Number.parseInt(c.fill.byte, 16))]);
    const decoder = new FrameDecoder(c.connection_version ?? NEWEST_VERSION);
    const frames = [];
    let end = "need_more";
    try {
      // OUTPUT comes out in pieces as it arrives: the pieces of one frame add up to its length.
      let streaming = 0;
      for (const f of decoder.push(bytes)) {
        if (f.type === FrameType.OUTPUT && streaming > 0) {
          frames[frames.length - 1].length += f.payload.length;
          streaming -= f.payload.length;
          continue;
        }
        frames.push({ type: NAMES.get(f.type), length: f.payload.length });
        if (f.type === FrameType.OUTPUT) streaming = bytes.readUInt32BE(4) - f.payload.length;
      }
    } catch (e) {
      if (!(e instanceof FrameError)) throw e;
      end = e.wireError;
    }
    assert.deepEqual(
      frames,
      c.frames.map((f) => ({ type: f.type, length: f.length })),
    );
    assert.equal(end, c.end);
  });
}

for (const c of load("payloads.json").filter((c) => fromDaemon(c) && !c.strict)) {
  test(`payload: ${c.name}`, () => {
    const payload = c.payload_hex !== undefined ? Buffer.from(c.payload_hex, "hex") : Buffer.from(c.payload, "utf8");
    const frame = { type: FrameType[c.frame], payload };
    if (c.error !== undefined) {
      assert.throws(
        () => parseJsonObject(frame),
        (e) => e instanceof FrameError && e.wireError === c.error,
      );
    } else {
      const body = parseJsonObject(frame);
      for (const [member, value] of Object.entries(c.members)) assert.deepEqual(body[member], value, member);
    }
  });
}

test("the corpus covers every frame type a daemon sends", () => {
  const seen = new Set(load("frames.json").filter(fromDaemon).flatMap((c) => c.frames.map((f) => f.type)));
  assert.deepEqual([...seen].sort(), [...FROM_DAEMON].map((n) => NAMES.get(n)).sort());
});
