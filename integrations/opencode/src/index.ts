// The opencode plugin: the pty_* tools on ptyvisor sessions, and a message to the opencode
// session when a command started with notifyOnExit ends (as the opencode-pty plugin does).
import type { Plugin } from "@opencode-ai/plugin";
import { createTools } from "./tools.js";

export { createTools, formatScreen, parseEscapes, toPtyId } from "./tools.js";
export type { ToolsOptions } from "./tools.js";

export const PtyvisorPlugin: Plugin = async ({ client }) => ({
  tool: createTools({
    notify: async (sessionId, text) => {
      await client.session.promptAsync({ path: { id: sessionId }, body: { parts: [{ type: "text", text }] } });
    },
  }),
});

export default PtyvisorPlugin;
