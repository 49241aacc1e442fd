import type { RunningCall, Session } from './session.js';
import type { Content } from './result.js';

/**
 * What `call.elicit`, `call.sample` and `call.roots` reject with when the MCP
 * client did not declare the capability the request needs (elicitation,
 * sampling or roots). `code` is -32021. On protocol 2026-07-28 the call has
 * then already failed for the client with that JSON-RPC error, so it can
 * declare the capability and call again; on 2025 sessions the handler
 * decides (let it propagate: the client reads an isError result).
 */
export class MissingCapabilityError extends Error {
  override name = 'MissingCapabilityError';
  readonly code = -32021;
}

/** The user's answer to `call.elicit`. */
export interface ElicitResult {
  /** `accept`, `decline` or `cancel` (dismissed). */
  action: 'accept' | 'decline' | 'cancel';
  /** The form's values when the user accepted, checked by the gateway against the schema asked for. */
  content?: Record<string, unknown>;
}

/** One message of a sampling request. */
export interface SamplingMessage {
  role: 'user' | 'assistant';
  content: Content;
}

/** What `call.sample` asks the client's model (MCP sampling/createMessage). */
export interface SampleRequest {
  messages: SamplingMessage[];
  maxTokens: number;
  systemPrompt?: string;
  temperature?: number;
  stopSequences?: string[];
  modelPreferences?: {
    hints?: { name?: string }[];
    costPriority?: number;
    speedPriority?: number;
    intelligencePriority?: number;
  };
  includeContext?: 'none' | 'thisServer' | 'allServers';
}

/** What the client's model wrote. `content` is one part or, since 2025-11-25, several. */
export interface SampleResult {
  role: 'user' | 'assistant';
  content: Content | Content[];
  model: string;
  stopReason?: string;
}

/** A directory or file the client's user lets servers work in. */
export interface Root {
  uri: string;
  name?: string;
}

/**
 * ask sends one MCP input request for the call to the gateway and resolves
 * with the client's response to it (see Call.elicit, Call.sample, Call.roots).
 */
export function ask(s: Session, id: string, c: RunningCall, method: string, params: unknown): Promise<unknown> {
  const what = `call.${method === 'elicitation/create' ? 'elicit' : method === 'sampling/createMessage' ? 'sample' : 'roots'}`;
  const signal = c.ac.signal;
  if (signal.aborted) return Promise.reject(signal.reason);
  if (c.done) return Promise.reject(new Error(`${what}: the call is over: its handler has returned`));
  if (c.asking) {
    return Promise.reject(new Error(`${what}: another input request of this call is still waiting for the client; ask one at a time`));
  }
  const input = `in-${++c.asked}`;
  return new Promise<unknown>((resolve, reject) => {
    const settle = (f: () => void) => {
      if (c.asking?.input !== input) return;
      c.asking = undefined;
      signal.removeEventListener('abort', onAbort);
      f();
    };
    const onAbort = () => settle(() => reject(signal.reason));
    c.asking = {
      input,
      answer: (responses, message, code) =>
        settle(() => {
          if (responses && typeof responses === 'object' && input in responses) {
            resolve((responses as Record<string, unknown>)[input]);
            return;
          }
          const text = `${what}: ${message || 'the gateway gave no response'}`;
          reject(code === -32021 ? new MissingCapabilityError(text) : new Error(text));
        }),
      fail: (err) => settle(() => reject(err)),
    };
    signal.addEventListener('abort', onAbort, { once: true });
    const requests = { [input]: { method, params } };
    void s.send(JSON.stringify({ type: 'ask', id, requests })).then((sent) => {
      if (!sent) settle(() => reject(new Error(`${what}: the request was not sent: the connection to the gateway is closed`)));
    });
  });
}
