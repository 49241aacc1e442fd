import type { RunningCall, Session } from './session.js';

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

/**
 * confirm sends the call's next question to the gateway and resolves with the
 * user's answer (see Call.confirm).
 */
export function confirm(s: Session, id: string, c: RunningCall, question: string): Promise<boolean> {
  const signal = c.ac.signal;
  if (signal.aborted) return Promise.reject(signal.reason);
  if (c.done) return Promise.reject(new Error('call.confirm: the call is over: its handler has returned'));
  if (c.question) {
    return Promise.reject(
      new Error('call.confirm: another question of this call is still waiting for the user; ask one at a time'),
    );
  }
  const input = `confirm-${++c.asked}`;
  return new Promise<boolean>((resolve, reject) => {
    const settle = (f: () => void) => {
      if (c.question?.input !== input) return;
      c.question = undefined;
      signal.removeEventListener('abort', onAbort);
      f();
    };
    const onAbort = () => settle(() => reject(signal.reason));
    c.question = {
      input,
      answer: (accepted) => settle(() => resolve(accepted)),
      fail: (err) => settle(() => reject(err)),
    };
    signal.addEventListener('abort', onAbort, { once: true });
    void s.send(JSON.stringify({ type: 'confirm', id, input, message: String(question) })).then((sent) => {
      if (!sent) settle(() => reject(new Error('call.confirm: the question was not sent: the connection to the gateway is closed')));
    });
  });
}
