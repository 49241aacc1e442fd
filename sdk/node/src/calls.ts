// Calls: what the agent does with one call message from the gateway: run
// the handler with its signal, deadline, progress and questions, and send
// the result or the error (docs/agent-protocol.md, "Calls").
import type { Logger } from './options.js';
import { ask, together } from './ask.js';
import { LOG_LEVELS, MAX_LOG_BYTES } from './log.js';
import type { LogLevel } from './log.js';
import type { ElicitResult, Inputs, Root, SampleRequest, SampleResult } from './ask.js';
import { confirm } from './confirm.js';
import type { App, Call, Caller, Person, RetryReason, Role, Scope } from './define.js';
import { ProgressThrottle } from './progress.js';
import { ProtocolError } from './protocolerror.js';
import { CallFailure, MAX_RESULT_BYTES } from './result.js';
import { abortError, type RunningCall, type Session, type WireMessage } from './session.js';

/** HandlerFor returns a function that runs the handler of a call and encodes its result, or undefined when there is none. */
export type HandlerFor = (kind: string, name: string, args: unknown) => ((call: Call) => Promise<string>) | undefined;

/**
 * startCall starts call message m on s: it runs the handler in the
 * background and sends its answer, unless the call was aborted first.
 */
export function startCall(s: Session, m: WireMessage, handlerFor: HandlerFor, log: Logger, logger = ''): void {
  const id = m.id;
  if (typeof id !== 'string' || id === '' || s.calls.has(id)) {
    log.warn(`spacefix: ignoring a call with an empty or repeated id ${JSON.stringify(id)}`);
    return;
  }
  const kind = m.kind as Call['kind'];
  const name = String(m.name ?? '');
  const run = handlerFor(kind, name, m.args);
  if (!run) {
    void s.send(JSON.stringify({ type: 'error', id, message: `This agent has no ${kind} ${JSON.stringify(name)}.` }));
    return;
  }

  const ac = new AbortController();
  const throttle = new ProgressThrottle((line) => void s.send(JSON.stringify({ type: 'progress', id, message: line })));
  ac.signal.addEventListener('abort', () => throttle.stop(), { once: true });
  const deadline = typeof m.deadline === 'number' && m.deadline > 0 ? m.deadline : 0;
  let timer: NodeJS.Timeout | undefined;
  if (deadline > 0) {
    const ms = Math.min(Math.max(deadline - Date.now(), 0), 2 ** 31 - 1);
    timer = setTimeout(() => ac.abort(abortError('TimeoutError', "The call's deadline passed: the gateway has given up on it.")), ms);
  }
  const caller: Caller = {
    keyId: m.caller?.keyId ?? '',
    keyName: m.caller?.keyName ?? '',
  };
  const running: RunningCall = { ac, done: false, asked: 0, question: undefined, asking: undefined };
  const call: Call = Object.freeze({
    callId: id,
    kind,
    tool: name,
    caller,
    clientCapabilities: Object.freeze(
      Array.isArray(m.caller?.capabilities) ? m.caller.capabilities.filter((c): c is string => typeof c === 'string') : [],
    ),
    ...who(m),
    deadline,
    ...retry(m),
    ...traceContext(m),
    signal: ac.signal,
    progress: (message: string) => throttle.line(message),
    confirm: (question: string) => confirm(s, id, running, question),
    elicit: (message: string, requestedSchema: Record<string, unknown>) =>
      ask(s, id, running, 'elicitation/create', { mode: 'form', message: String(message), requestedSchema }) as Promise<ElicitResult>,
    sample: (req: SampleRequest) => {
      if (!(req?.maxTokens > 0)) return Promise.reject(new Error('call.sample: maxTokens must be positive'));
      return ask(s, id, running, 'sampling/createMessage', req) as Promise<SampleResult>;
    },
    together: (inputs: Inputs) => together(s, id, running, inputs),
    log: (level: LogLevel, data: unknown) => {
      if (!LOG_LEVELS.includes(level)) throw new Error(`call.log: level must be one of ${LOG_LEVELS.join(', ')}, not ${JSON.stringify(level)}`);
      if (running.done || ac.signal.aborted) return;
      const body = JSON.stringify({ type: 'log', id, level, ...(logger ? { logger } : {}), data: data ?? null });
      if (body.length > MAX_LOG_BYTES + 200) {
        log.warn(`spacefix: a log message for the client was dropped: over ${MAX_LOG_BYTES} bytes`);
        return;
      }
      void s.send(body);
    },
    roots: async () => ((await ask(s, id, running, 'roots/list', {})) as { roots?: Root[] }).roots ?? [],
  });
  s.calls.set(id, running);

  void (async () => {
    let answer: string;
    try {
      const result = await run(call);
      answer = `{"type":"result","id":${JSON.stringify(id)},"result":${result}}`;
    } catch (err) {
      const message = errorMessage(err, kind);
      log.warn(`spacefix: ${kind} ${JSON.stringify(name)} failed: ${message}`, ...(err instanceof CallFailure ? [] : [err]));
      answer = JSON.stringify({ type: 'error', id, message, ...protocolFields(err, log) });
    } finally {
      clearTimeout(timer);
      throttle.stop();
      running.done = true;
      running.question?.fail(new Error('call.confirm: the call is over: its handler has returned'));
      running.asking?.fail(new Error('the call is over: its handler has returned'));
      s.finished(id);
    }
    // A late answer is not wanted: the gateway cancelled the call, gave up
    // at the deadline, or the connection it came on has ended.
    if (!ac.signal.aborted) await s.send(answer);
  })();
}

/** errorMessage is the message a failed call sends: the error's message only, never its stack. */
function errorMessage(err: unknown, kind: string): string {
  let msg: string;
  if (err instanceof Error) msg = err.message;
  else if (typeof err === 'string') msg = err;
  else if (err !== null && typeof err === 'object' && typeof (err as { message?: unknown }).message === 'string') {
    msg = (err as { message: string }).message;
  } else msg = String(err);
  if (msg === '') {
    const what = err instanceof Error ? `an ${err.name}` : `a ${typeof err} value`;
    msg = `The ${kind} handler threw ${what} with no message.`;
  }
  if (msg.length > MAX_RESULT_BYTES / 4) msg = msg.slice(0, MAX_RESULT_BYTES / 4);
  return msg;
}

/**
 * protocolFields are the code and data an error message carries when the
 * handler threw a ProtocolError: the client then gets a JSON-RPC error. Code
 * 0 is no code on the wire: it goes as -32603.
 */
function protocolFields(err: unknown, log: Logger): { code?: number; data?: unknown } {
  if (!(err instanceof ProtocolError)) return {};
  const out: { code: number; data?: unknown } = { code: err.code === 0 ? -32603 : err.code };
  if (err.data !== undefined) {
    try {
      JSON.stringify(err.data);
      out.data = err.data;
    } catch (e) {
      log.warn(`spacefix: a ProtocolError's data is not JSON; sent without it: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  return out;
}

/** The earlier call this one repeats after an unknown outcome, if the gateway says so. */
const ROLES: readonly string[] = ['viewer', 'editor', 'owner'];
const SCOPES: readonly string[] = ['mcp:read', 'mcp:write'];

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** Who is calling beyond the key: the person, app, project, role, scopes and identity token, as the gateway said. */
function who(m: WireMessage): Pick<Call, 'person' | 'app' | 'project' | 'role' | 'scopes' | 'identityToken'> {
  const c = m.caller ?? {};
  const p = c.person as Record<string, unknown> | undefined;
  const a = c.app as Record<string, unknown> | undefined;
  const person: Person | undefined =
    p && typeof p === 'object' && str(p.id) !== '' ? Object.freeze({ id: str(p.id), email: str(p.email), name: str(p.name) }) : undefined;
  const app: App | undefined = a && typeof a === 'object' && str(a.id) !== '' ? Object.freeze({ id: str(a.id), name: str(a.name) }) : undefined;
  const role = ROLES.includes(str(c.role)) ? (str(c.role) as Role) : '';
  const scopes = Array.isArray(c.scopes) ? c.scopes.filter((s): s is Scope => typeof s === 'string' && SCOPES.includes(s)) : [];
  return { person, app, project: str(c.project), role, scopes: Object.freeze(scopes), identityToken: str(c.identityToken) };
}

function retry(m: WireMessage): { retryOf: string; retryReason: RetryReason } {
  if (typeof m.retryOf !== 'string' || m.retryOf === '') return { retryOf: '', retryReason: '' };
  const reason = m.retryReason === 'timeout' || m.retryReason === 'disconnected' ? m.retryReason : '';
  return { retryOf: m.retryOf, retryReason: reason };
}

/** A W3C traceparent of version 00 (other versions keep this prefix too). */
const traceparentRe = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}/;

/** The call's W3C trace context; a malformed traceparent is ignored, as W3C says. */
function traceContext(m: WireMessage): { traceparent: string; tracestate: string } {
  if (typeof m.traceparent !== 'string' || !traceparentRe.test(m.traceparent)) return { traceparent: '', tracestate: '' };
  return { traceparent: m.traceparent, tracestate: typeof m.tracestate === 'string' ? m.tracestate : '' };
}
