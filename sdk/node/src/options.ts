/** What `new Agent` takes, and where it logs. */

/** The gateway an agent connects to when neither `url` nor SPACEFIX_URL says otherwise. */
export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** How long close() waits, by default, for running calls to finish after the drain. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 10_000;

/**
 * Where the agent writes what happens to its connection and its handlers.
 * `console` is one; the default writes info, warnings and errors to the
 * console.
 */
export interface Logger {
  debug?(message: string, ...meta: unknown[]): void;
  info(message: string, ...meta: unknown[]): void;
  warn(message: string, ...meta: unknown[]): void;
  error(message: string, ...meta: unknown[]): void;
}

/** What `new Agent` takes. Every field is optional. */
export interface AgentOptions {
  /** The agent key. Absent means the environment variable SPACEFIX_API_KEY. Create one with `spacefix keys create --kind agent`. */
  apiKey?: string;
  /** The gateway's base URL (http, https, ws or wss). Absent means SPACEFIX_URL, else http://127.0.0.1:8080. */
  url?: string;
  /** The agent's name (1 to 64 of A-Z a-z 0-9 _ -), shown in the dashboard; with `namespace`, put in front of tool names. */
  name?: string;
  /** The name people read, in the dashboard and in the prefix of a community agent's descriptions. Absent means name. */
  displayName?: string;
  /** Who wrote the agent. */
  author?: string;
  /** Expose tools as `<name with - turned to _>_<tool>` ("test-radar" + "run_tests" → "test_radar_run_tests"). Needs `name`. */
  namespace?: boolean;
  /** This replica's instance name ("eu-1", at most 64 characters), so a caller may pick it. */
  instance?: string;
  /** The agent's own version, shown in the dashboard. */
  version?: string;
  /** Where to log. Absent means the console. */
  logger?: Logger;
  /**
   * How long close() lets running calls finish after it told the gateway to
   * drain, in ms; then their signals abort. Default 10000; 0 aborts them at
   * once.
   */
  drainTimeoutMs?: number;
}

/** The default logger: info, warnings and errors to the console. */
export const consoleLogger: Logger = {
  debug() {},
  info: (m, ...a) => console.info(m, ...a),
  warn: (m, ...a) => console.warn(m, ...a),
  error: (m, ...a) => console.error(m, ...a),
};
