// Typed errors: the daemon's ERROR codes (docs/protocol.md, 5.6 and 9.9), plus the failures a
// client sees on its own side (a malformed frame from the server, a connection lost).

/** The stable codes of ERROR frames. A code this client does not know is mapped to `internal`. */
export const ERROR_CODES = [
  "bad_frame",
  "unsupported_version",
  "too_big",
  "unexpected_frame",
  "wrong_fd_count",
  "not_a_directory",
  "cwd_mismatch",
  "not_allowed",
  "busy",
  "rate_limited",
  "overloaded",
  "handshake_timeout",
  "start_failed",
  "internal",
  "shutting_down",
  "no_such_session",
  "session_ended",
  "no_shell_integration",
  "held_by_supervisor",
  "profile_not_allowed",
  "profile_unavailable",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** Base class of every error this package throws on purpose. */
export class PtyvisorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The daemon refused a request with an ERROR frame. `code` is stable; `message` is for humans. */
export class ServerError extends PtyvisorError {
  readonly code: ErrorCode;
  /** The code as the server sent it (differs from `code` when it was unknown). */
  readonly rawCode: string;
  /** The ERROR's message as the server sent it. */
  readonly serverMessage: string;
  constructor(rawCode: string, serverMessage: string) {
    const code = (ERROR_CODES as readonly string[]).includes(rawCode) ? (rawCode as ErrorCode) : "internal";
    super(`${rawCode}: ${serverMessage}`);
    this.code = code;
    this.rawCode = rawCode;
    this.serverMessage = serverMessage;
  }
}

/**
 * The daemon does not speak the protocol version a call needs (ERROR unsupported_version,
 * section 8): e.g. snapshot() against a daemon of version 2, which has no screen.
 */
export class UnsupportedVersionError extends ServerError {
  /** The version the call needed. */
  readonly version: number;
  constructor(feature: string, version: number, serverMessage: string) {
    super("unsupported_version", serverMessage);
    this.message = `the daemon does not offer ${feature}: it does not speak protocol version ${version} (unsupported_version: ${serverMessage})`;
    this.version = version;
  }
}

/** The server sent something the protocol does not allow; the connection is closed. */
export class ProtocolError extends PtyvisorError {}

/** The connection ended without the frame that should have ended it (daemon restarted or crashed). */
export class ConnectionLostError extends PtyvisorError {}

/** The socket could not be reached (no daemon, wrong path, permission). `cause` is the system error. */
export class ConnectError extends PtyvisorError {
  readonly code: string;
  constructor(message: string, code: string) {
    super(message);
    this.code = code;
  }
}
