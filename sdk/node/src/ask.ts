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

/** A form for `call.together`: what `call.elicit` takes. */
export interface ElicitRequest {
  message: string;
  schema: Record<string, unknown>;
  /** In `elicits`, the request's id on the wire (see `ids`); absent means an id of the SDK's own. */
  id?: string;
}

/** What `call.together` asks in one round; each may be left out. */
export interface Inputs {
  elicit?: ElicitRequest;
  /**
   * More forms for the same round, answered in `Answers.elicits` in the same
   * order: two questions the user answers at once, for example.
   */
  elicits?: ElicitRequest[];
  sample?: SampleRequest;
  roots?: boolean;
  /**
   * The input requests' ids on the wire (the keys of a 2026-07-28 client's
   * inputRequests), for clients that look for particular ones; absent means
   * ids of the SDK's own. They must differ from each other and from the ids
   * of `elicits`.
   */
  ids?: { elicit?: string; sample?: string; roots?: string };
}

/** The client's responses to `call.together`, for the requests asked. */
export interface Answers {
  elicit?: ElicitResult;
  /** The answers to `elicits`, in the same order. */
  elicits?: ElicitResult[];
  sample?: SampleResult;
  roots?: Root[];
}

/** How many input requests the gateway passes on in one round. */
const MAX_INPUTS = 8;

/** together asks several input requests in one round (see Call.together). */
export async function together(s: Session, id: string, c: RunningCall, inputs: Inputs): Promise<Answers> {
  const reqs: Record<string, { method: string; params: unknown; id?: string }> = {};
  if (inputs?.elicit) {
    reqs.elicit = { method: 'elicitation/create', params: { mode: 'form', message: String(inputs.elicit.message), requestedSchema: inputs.elicit.schema }, id: inputs.ids?.elicit };
  }
  if (inputs?.sample) {
    if (!(inputs.sample.maxTokens > 0)) throw new Error('call.together: sample.maxTokens must be positive');
    reqs.sample = { method: 'sampling/createMessage', params: inputs.sample, id: inputs.ids?.sample };
  }
  const elicits = Array.isArray(inputs?.elicits) ? inputs.elicits : [];
  elicits.forEach((e, i) => {
    reqs[`elicit-${i + 1}`] = { method: 'elicitation/create', params: { mode: 'form', message: String(e?.message), requestedSchema: e?.schema }, id: e?.id };
  });
  if (inputs?.roots) reqs.roots = { method: 'roots/list', params: {}, id: inputs.ids?.roots };
  const n = Object.keys(reqs).length;
  if (n === 0) throw new Error('call.together: no input requested');
  if (n > MAX_INPUTS) throw new Error(`call.together: ${n} input requests; at most ${MAX_INPUTS} go in one round`);
  const given = Object.values(reqs).map((r) => r.id).filter((x): x is string => !!x);
  const twice = given.find((x, i) => given.indexOf(x) !== i);
  if (twice !== undefined) throw new Error(`call.together: input request id ${JSON.stringify(twice)} is given twice; each request needs its own`);
  const rs = await askAll(s, id, c, 'call.together', reqs);
  const out: Answers = {};
  if ('elicit' in rs) out.elicit = rs.elicit as ElicitResult;
  if (elicits.length > 0) out.elicits = elicits.map((_, i) => rs[`elicit-${i + 1}`] as ElicitResult);
  if ('sample' in rs) out.sample = rs.sample as SampleResult;
  if ('roots' in rs) out.roots = ((rs.roots as { roots?: Root[] }).roots ?? []);
  return out;
}

/**
 * ask sends one MCP input request for the call to the gateway and resolves
 * with the client's response to it (see Call.elicit, Call.sample, Call.roots).
 */
export async function ask(s: Session, id: string, c: RunningCall, method: string, params: unknown): Promise<unknown> {
  const what = `call.${method === 'elicitation/create' ? 'elicit' : method === 'sampling/createMessage' ? 'sample' : 'roots'}`;
  return (await askAll(s, id, c, what, { '': { method, params } }))[''];
}

/**
 * askAll sends input requests by name for the call and resolves with the
 * client's responses by the same names. Ids on the wire are unique per round
 * (`in-2`, or `in-2-sample` among several).
 */
function askAll(
  s: Session,
  id: string,
  c: RunningCall,
  what: string,
  reqs: Record<string, { method: string; params: unknown; id?: string }>,
): Promise<Record<string, unknown>> {
  const signal = c.ac.signal;
  if (signal.aborted) return Promise.reject(signal.reason);
  if (c.done) return Promise.reject(new Error(`${what}: the call is over: its handler has returned`));
  if (c.asking) {
    return Promise.reject(new Error(`${what}: another input request of this call is still waiting for the client; ask one at a time`));
  }
  const round = `in-${++c.asked}`;
  const wire = (name: string) => reqs[name]?.id || (name === '' ? round : `${round}-${name}`);
  return new Promise<Record<string, unknown>>((resolve, reject) => {
    const settle = (f: () => void) => {
      if (c.asking?.input !== round) return;
      c.asking = undefined;
      signal.removeEventListener('abort', onAbort);
      f();
    };
    const onAbort = () => settle(() => reject(signal.reason));
    c.asking = {
      input: round,
      answer: (responses, message, code) =>
        settle(() => {
          if (responses && typeof responses === 'object') {
            const rs = responses as Record<string, unknown>;
            const out: Record<string, unknown> = {};
            for (const name of Object.keys(reqs)) {
              if (!(wire(name) in rs)) {
                reject(new Error(`${what}: the gateway's answer has no response to ${wire(name)}`));
                return;
              }
              out[name] = rs[wire(name)];
            }
            resolve(out);
            return;
          }
          const text = `${what}: ${message || 'the gateway gave no response'}`;
          reject(code === -32021 ? new MissingCapabilityError(text) : new Error(text));
        }),
      fail: (err) => settle(() => reject(err)),
    };
    signal.addEventListener('abort', onAbort, { once: true });
    const requests = Object.fromEntries(Object.entries(reqs).map(([name, r]) => [wire(name), { method: r.method, params: r.params }]));
    void s.send(JSON.stringify({ type: 'ask', id, requests })).then((sent) => {
      if (!sent) settle(() => reject(new Error(`${what}: the request was not sent: the connection to the gateway is closed`)));
    });
  });
}
