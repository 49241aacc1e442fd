/** The severity of a log message for the client, least severe first (RFC 5424, as MCP names them). */
export type LogLevel = 'debug' | 'info' | 'notice' | 'warning' | 'error' | 'critical' | 'alert' | 'emergency';

/** Every LogLevel, least severe first. */
export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

/** The largest data of one log message the gateway passes on, in bytes of JSON. */
export const MAX_LOG_BYTES = 16 * 1024;
