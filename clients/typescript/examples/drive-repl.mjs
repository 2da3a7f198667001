// Driving an interactive program (a Python REPL) as a controller: wait for its prompt, type,
// read the answer, quit. The pattern of `expect`, on a ptyvisor session.
//
//   node examples/drive-repl.mjs
import { Client } from "ptyvisor";

/** Waits for output matching `pattern`; returns the text up to the match and consumes it. */
function expecter(session) {
  let buffered = "";
  let waiting = null;
  session.on("data", (chunk) => {
    buffered += chunk.toString("utf8");
    waiting?.();
  });
  return (pattern, timeoutMs = 10000) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting = null;
        reject(new Error(`no ${pattern} within ${timeoutMs} ms; got ${JSON.stringify(buffered)}`));
      }, timeoutMs);
      waiting = () => {
        const match = pattern.exec(buffered);
        if (!match) return;
        clearTimeout(timer);
        waiting = null;
        const before = buffered.slice(0, match.index);
        buffered = buffered.slice(match.index + match[0].length);
        resolve(before);
      };
      waiting();
    });
}

const client = new Client();
const repl = await client.open(["python3", "-q", "-i"], { term: "dumb", env: { PATH: "/usr/bin:/bin", PYTHONSTARTUP: "" } });
const expect = expecter(repl);

await expect(/>>> /);
repl.write("6 * 7\r");
const answer = (await expect(/>>> /)).split("\r\n")[1];
console.log(`6 * 7 = ${answer}`);

repl.write("import sys; sys.version_info.major\r");
const major = (await expect(/>>> /)).split("\r\n")[1];
console.log(`python major version: ${major}`);

repl.write("exit()\r");
const exit = await repl.exited;
console.log(`the REPL exited: ${exit.status} ${exit.code}`);
process.exit(answer === "42" && exit.code === 0 ? 0 : 1);
