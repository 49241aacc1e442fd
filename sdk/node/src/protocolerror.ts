/** JSON-RPC error codes for a ProtocolError. */
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;

/**
 * Thrown by a handler, ProtocolError ends the call with a JSON-RPC error
 * instead of a result: the MCP client's request fails with `code`,
 * `message` and `data` (any JSON, optional).
 *
 * Use it rarely. A tool's own failure — no such order, a service down — is an
 * ordinary Error (or `toolError`): the model reads it and can try something
 * else. A protocol error is for a request that was itself wrong in a way the
 * client, not the model, must handle, and for a task that must end `failed`
 * (at protocol 2026-07-28 a task whose tool returned an error result ends
 * `completed`). Resource reads and prompts answer with a JSON-RPC error
 * anyway; a ProtocolError chooses its code.
 *
 * The gateway passes -32602 (invalid params), -32603 (internal error) and any
 * application code outside the range JSON-RPC reserves (-32768 to -32000) as
 * they are; any other code of that range becomes -32603, the message kept.
 */
export class ProtocolError extends Error {
  override name = 'ProtocolError';
  /** The JSON-RPC error code. */
  readonly code: number;
  /** Details the client may act on, any JSON; undefined sends none. */
  readonly data: unknown;

  constructor(code: number, message: string, data?: unknown) {
    super(message);
    if (!Number.isInteger(code)) throw new TypeError(`ProtocolError: code must be a whole number, not ${JSON.stringify(code)}`);
    this.code = code;
    this.data = data;
  }
}
