// Registration: the HTTP side of connecting (docs/agent-protocol.md,
// "Registration"): the gateway's URLs, the registration's body, posting it,
// and refusals.
import type { IncomingMessage } from 'node:http';

import type { AgentOptions } from './options.js';
import type { Prompt, Resource, Tool } from './define.js';
import { PROTOCOL_VERSION, SDK_VERSION } from './version.js';

const REGISTER_PATH = '/v1/agent/register';
const CONNECT_PATH = '/v1/agent';
/** How much of an answer's text is kept: the gateway's reasons are short. */
const MAX_ANSWER_TEXT = 64 * 1024;

/**
 * registrationBody returns the JSON registration of an agent with options o
 * offering tools (each with whether it is switched off), resources and prompts.
 */
export function registrationBody(
  o: AgentOptions,
  tools: readonly { tool: Tool<any>; disabled: boolean }[],
  resources: readonly Resource[],
  prompts: readonly Prompt<any>[],
  off: ReadonlySet<string> = new Set(),
): string {
  const reg = {
    protocol: PROTOCOL_VERSION,
    sdk: `node/${SDK_VERSION}`,
    name: o.name || undefined,
    namespace: o.namespace || undefined,
    instance: o.instance || undefined,
    version: o.version || undefined,
    // Not (yet) fields of the protocol's registration; a peer may add
    // optional fields, and the gateway ignores them until it reads them.
    displayName: o.displayName || undefined,
    author: o.author || undefined,
    tools: tools.map(({ tool, disabled }) => ({
      name: tool.name,
      title: tool.title,
      description: tool.description,
      inputSchema: tool.inputSchema,
      outputSchema: tool.outputSchema,
      annotations: tool.annotations,
      timeoutMs: tool.timeoutMs || undefined,
      disabled: disabled || undefined,
      execution: tool.execution,
      idempotencyKey: tool.idempotencyKey,
    })),
    resources:
      resources.length > 0 ? resources.map((r) => ({ uri: r.uri, name: r.name, description: r.description, mimeType: r.mimeType, ...(r.template && { template: true }), ...(r.complete && { completable: true }), ...(off.has(`resource:${r.uri}`) && { disabled: true }) })) : undefined,
    prompts:
      prompts.length > 0
        ? prompts.map((p) => ({
            name: p.name,
            title: p.title,
            description: p.description,
            arguments: p.arguments.length > 0 ? p.arguments : undefined,
            ...(off.has(`prompt:${p.name}`) && { disabled: true }),
          }))
        : undefined,
  };
  return JSON.stringify(reg);
}

/**
 * register posts the registration body to url with the agent key and
 * returns the ticket to connect with. It uses the built-in fetch; stop
 * aborts it (close()), and so does a wait longer than timeoutMs. Its timer
 * is cleared when it settles, so that nothing of it holds the process open.
 */
export async function register(url: string, apiKey: string, body: string, stop: AbortSignal, timeoutMs: number): Promise<string> {
  const ac = new AbortController();
  const onStop = () => ac.abort(stop.reason);
  if (stop.aborted) onStop();
  else stop.addEventListener('abort', onStop, { once: true });
  const timer = setTimeout(() => ac.abort(new Error(`register: no answer within ${timeoutMs / 1000} s`)), timeoutMs);
  let status: number, statusText: string, text: string;
  // fetch refuses a URL with user:password@ in it; the agent key is the
  // credential here, as it was when node:http let the header win.
  const target = new URL(url);
  target.username = '';
  target.password = '';
  try {
    const res = await fetch(target, {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', 'User-Agent': `spacefix-node/${SDK_VERSION}` },
      body,
      signal: ac.signal,
      redirect: 'manual', // a 3xx is reported with its status, as any other answer
    });
    ({ status, statusText } = res);
    text = (await res.text()).slice(0, MAX_ANSWER_TEXT).trim();
  } catch (err) {
    if (ac.signal.aborted && err === ac.signal.reason) throw err;
    throw new Error(`register: ${describeError(err)}`);
  } finally {
    clearTimeout(timer);
    stop.removeEventListener('abort', onStop);
  }
  if (status !== 200) {
    if (status >= 400 && status < 500) throw new RefusedError('register', status, text);
    throw new Error(`register: ${status} ${statusText}${text ? ': ' + text.slice(0, 300) : ''}`);
  }
  let ticket: unknown;
  try {
    ticket = (JSON.parse(text) as { ticket?: unknown }).ticket;
  } catch {
    // handled below
  }
  if (typeof ticket !== 'string' || ticket === '') {
    throw new Error(`register: the gateway answered 200 without a ticket: ${JSON.stringify(text.slice(0, 200))}`);
  }
  return ticket;
}

/**
 * describeError is the reason a request failed: fetch's "fetch failed" says
 * nothing, its cause does; a dual-stack connect fails with an
 * AggregateError whose first error says why.
 */
function describeError(err: unknown): string {
  let e: unknown = err;
  if (e instanceof TypeError && e.cause !== undefined) e = e.cause;
  const nested = (e as { errors?: unknown })?.errors;
  if (Array.isArray(nested) && nested[0] instanceof Error) return nested[0].message;
  return e instanceof Error ? e.message : String(e);
}

/** A 4xx answer from the gateway: its text says what to fix. */
export class RefusedError extends Error {
  override name = 'RefusedError';
  constructor(
    readonly step: 'register' | 'connect',
    readonly status: number,
    readonly text: string,
  ) {
    super(`${step}: ${status}${STATUS_TEXT[status] ? ' ' + STATUS_TEXT[status] : ''}: ${text}`);
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  413: 'Request Entity Too Large',
  429: 'Too Many Requests',
};

/** gatewayURLs returns the registration URL (http or https) and the WebSocket URL (ws or wss) of the gateway at base. */
export function gatewayURLs(base: string): [string, string] {
  let u: URL;
  try {
    u = new URL(base);
  } catch {
    throw new TypeError(`new Agent: gateway URL ${JSON.stringify(base)} is not a URL; use http://HOST:PORT or https://HOST`);
  }
  let httpScheme: string, wsScheme: string;
  switch (u.protocol) {
    case 'http:':
    case 'ws:':
      [httpScheme, wsScheme] = ['http:', 'ws:'];
      break;
    case 'https:':
    case 'wss:':
      [httpScheme, wsScheme] = ['https:', 'wss:'];
      break;
    default:
      throw new TypeError(`new Agent: gateway URL ${JSON.stringify(base)}: use http:// or https://`);
  }
  const prefix = u.pathname.replace(/\/+$/, '');
  const host = u.host;
  const auth = u.username ? `${u.username}${u.password ? ':' + u.password : ''}@` : '';
  return [`${httpScheme}//${auth}${host}${prefix}${REGISTER_PATH}`, `${wsScheme}//${auth}${host}${prefix}${CONNECT_PATH}`];
}

/** readBody reads up to 64 KiB of an HTTP answer's text (a refused WebSocket handshake's). */
export function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      if (size < MAX_ANSWER_TEXT) chunks.push(c);
      size += c.length;
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8').trim()));
    res.on('error', () => resolve(Buffer.concat(chunks).toString('utf8').trim()));
  });
}
