import type { RunningCall, Session } from './session.js';

export { CANNOT_CONFIRM, CannotConfirmError, isCannotConfirm } from './cannotconfirm.js';

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
