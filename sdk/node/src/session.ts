// Session: one WebSocket connection to the gateway and the calls on it.
import WebSocket from 'ws';

import { CannotConfirmError } from './cannotconfirm.js';
import type { Logger } from './options.js';

/** How long close() waits for the gateway to answer the close handshake. */
const CLOSE_WAIT_MS = 2_000;

/** A message of the agent protocol, either way. */
export interface WireMessage {
  type: string;
  id?: string;
  kind?: string;
  name?: string;
  args?: unknown;
  deadline?: number;
  caller?: {
    keyId?: string;
    keyName?: string;
    capabilities?: unknown;
    person?: unknown;
    app?: unknown;
    project?: unknown;
    role?: unknown;
    scopes?: unknown;
    identityToken?: unknown;
  };
  retryOf?: unknown;
  retryReason?: unknown;
  traceparent?: unknown;
  tracestate?: unknown;
  message?: string;
  reason?: string;
  input?: string;
  accepted?: unknown;
  responses?: unknown;
  code?: unknown;
  welcome?: { protocol?: number; replica?: string; project?: string; agent?: string; callWaitMs?: number; heartbeatMs?: number };
}

/**
 * Session is one WebSocket connection to the gateway. It owns the calls that
 * arrived on it: their signals abort when it ends.
 */
export class Session {
  welcomed = false;
  error: Error | undefined;
  readonly calls = new Map<string, RunningCall>();
  #heartbeat: NodeJS.Timeout | undefined;
  #awaitingPong = false;
  #closeTimer: NodeJS.Timeout | undefined;
  #ended = false;
  /** Who waits in changed() for a call to finish or the connection to end. */
  readonly #watchers = new Set<() => void>();

  constructor(
    readonly ws: WebSocket,
    readonly log: Logger,
  ) {}

  /** send writes one message; it resolves false when the connection is not open. */
  send(data: string): Promise<boolean> {
    return new Promise((resolve) => {
      if (this.ws.readyState !== WebSocket.OPEN) return resolve(false);
      this.ws.send(data, (err) => {
        if (err) this.log.debug?.(`spacefix: message not sent: ${err.message}`);
        resolve(!err);
      });
    });
  }

  /** fail records why the connection ends and, if terminate, drops it. */
  fail(err: Error, terminate = true): void {
    this.error ??= err;
    if (terminate) this.ws.terminate();
  }

  /**
   * close aborts the calls still running, then starts the close handshake,
   * dropping the socket if the gateway does not answer in time.
   */
  close(code: number, reason: string): void {
    this.error ??= new Error('the agent is closing');
    if (this.#ended) return;
    this.abortAll();
    if (this.ws.readyState === WebSocket.CONNECTING) {
      this.ws.terminate();
      return;
    }
    this.ws.close(code, reason);
    this.#closeTimer ??= setTimeout(() => this.ws.terminate(), CLOSE_WAIT_MS);
  }

  /** Whether the connection has ended. */
  get isEnded(): boolean {
    return this.#ended;
  }

  /** finished forgets a call whose handler has returned. */
  finished(id: string): void {
    this.calls.delete(id);
    this.#notify();
  }

  /** changed resolves when a call finishes, the connection ends, or after ms. */
  changed(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.#watchers.delete(done);
        resolve();
      };
      const t = setTimeout(done, Math.max(ms, 1));
      this.#watchers.add(done);
    });
  }

  #notify(): void {
    for (const w of [...this.#watchers]) w();
  }

  /** confirmed hands the gateway's answer to the call's question, if it still waits for it. */
  confirmed(m: WireMessage): void {
    const q = m.id === undefined ? undefined : this.calls.get(m.id)?.question;
    if (!q || q.input !== m.input) return; // a question that gave up, or never ours
    if (typeof m.accepted === 'boolean') q.answer(m.accepted);
    else q.fail(new CannotConfirmError(typeof m.message === 'string' ? m.message : ''));
  }

  /** answered hands the gateway's answer to the call's input request, if it still waits for it. */
  answered(m: WireMessage): void {
    const a = m.id === undefined ? undefined : this.calls.get(m.id)?.asking;
    if (!a) return; // a request that gave up, or never ours
    a.answer(m.responses, typeof m.message === 'string' ? m.message : '', typeof m.code === 'number' ? m.code : 0);
  }

  cancel(id: string | undefined, reason: string | undefined): void {
    const ac = id === undefined ? undefined : this.calls.get(id)?.ac;
    if (!ac) return; // finished already, or never ours
    const r = reason ?? 'cancelled';
    ac.abort(
      r === 'timeout'
        ? abortError('TimeoutError', "The call's wait expired: the gateway has given up on it.")
        : r === 'shutdown'
          ? abortError('AbortError', 'The gateway is shutting down and stopped the call.')
          : abortError('AbortError', 'The client cancelled the call.'),
    );
  }

  /** startHeartbeat pings every ms and drops the connection when a pong does not come within another ms. */
  startHeartbeat(ms: number): void {
    this.#heartbeat = setInterval(() => {
      if (this.#awaitingPong) {
        this.fail(new Error(`no pong from the gateway within ${ms} ms`));
        return;
      }
      this.#awaitingPong = true;
      try {
        this.ws.ping();
      } catch {
        // The close event follows.
      }
    }, ms);
  }

  pong(): void {
    this.#awaitingPong = false;
  }

  /** abortAll aborts every call running on this connection. */
  abortAll(): void {
    const reason = this.error?.message === 'the agent is closing'
      ? abortError('AbortError', 'The agent is closing.')
      : abortError('AbortError', 'The connection to the gateway ended.');
    for (const { ac } of this.calls.values()) ac.abort(reason);
  }

  /** ended stops the heartbeat and aborts every call that arrived on this connection. */
  ended(): void {
    this.#ended = true;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#closeTimer);
    this.abortAll();
    this.calls.clear();
    this.#notify();
  }
}

/** A call whose handler is running. */
export interface RunningCall {
  readonly ac: AbortController;
  /** Whether the handler has returned. */
  done: boolean;
  /** How many questions the handler has asked, for their input names. */
  asked: number;
  /** The question waiting for the user's answer, if any: one at a time. */
  question: { readonly input: string; answer(accepted: boolean): void; fail(err: Error): void } | undefined;
  /** The input request (elicit, sample, roots) waiting for the client, if any: one at a time. */
  asking:
    | { readonly input: string; answer(responses: unknown, message: string, code: number): void; fail(err: Error): void }
    | undefined;
}

/** abortError is the reason a call's signal aborts with. */
export function abortError(name: 'AbortError' | 'TimeoutError', message: string): Error {
  const e = new Error(message);
  e.name = name;
  return e;
}
