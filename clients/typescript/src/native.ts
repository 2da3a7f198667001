// The native part: START with the working directory's descriptor (SCM_RIGHTS), which Node's
// and Bun's `net` cannot send. A prebuilt N-API module shipped in the package (prebuilds/),
// so installing needs no compiler and no network; N-API is ABI-stable, so one build serves
// every Node >= 20 and Bun.
import { createRequire } from "node:module";
import { PtyvisorError } from "./errors.js";

interface SendFd {
  sendWithFd(socketFd: number, frame: Buffer, dirFd: number): number;
}

let loaded: SendFd | null = null;

export function sendfd(): SendFd {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  const where = `../prebuilds/${process.platform}-${process.arch}/sendfd.node`;
  try {
    loaded = require(where) as SendFd;
  } catch (e) {
    throw new PtyvisorError(`ptyvisor: no native sender for ${process.platform}-${process.arch} (${(e as Error).message})`);
  }
  return loaded;
}
