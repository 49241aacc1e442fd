/** The words every CannotConfirmError's message starts with. */
export const CANNOT_CONFIRM = 'the MCP client cannot ask the user';

/**
 * What `call.confirm` rejects with when there is no answer to be had: the MCP
 * client cannot ask its user (it does not support elicitation). The message
 * starts with `the MCP client cannot ask the user` and says what the model
 * should do instead, so a handler can let it propagate: the client then gets
 * a failed result (`isError`) with that text.
 *
 * ```js
 * try {
 *   if (!(await call.confirm(`Delete order ${id}?`))) return `Kept order ${id}.`;
 * } catch (err) {
 *   if (!(err instanceof CannotConfirmError)) throw err;
 *   // no way to ask: refuse, or go ahead if that is safe
 * }
 * ```
 */
export class CannotConfirmError extends Error {
  override name = 'CannotConfirmError';
  /** The gateway's reason, without the leading words. */
  readonly reason: string;

  constructor(reason: string) {
    const r = trimCannot(reason);
    super(r ? `${CANNOT_CONFIRM}: ${r}` : CANNOT_CONFIRM);
    this.reason = r;
  }
}

/** isCannotConfirm says whether err is a CannotConfirmError, also one from another copy of this package. */
export function isCannotConfirm(err: unknown): err is CannotConfirmError {
  return (
    err instanceof CannotConfirmError ||
    (err instanceof Error && err.name === 'CannotConfirmError' && err.message.startsWith(CANNOT_CONFIRM))
  );
}

/** trimCannot drops the gateway's repeat of the leading words. */
function trimCannot(msg: string): string {
  const m = String(msg ?? '').trim();
  if (m.startsWith(CANNOT_CONFIRM)) return m.slice(CANNOT_CONFIRM.length).replace(/^[:\s]+/, '');
  return m;
}
