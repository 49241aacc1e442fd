// Registration: the HTTP side of connecting (docs/agent-protocol.md,
// "Registration"): the gateway's URLs, refusals, and the wait between tries.
import type { IncomingMessage } from 'node:http';

const REGISTER_PATH = '/v1/agent/register';
const CONNECT_PATH = '/v1/agent';
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 30_000;

/**
 * backoffDelay returns the wait in ms before retry number `attempt` (from 0):
 * 250 ms doubling up to 30 s, each with ±20 % jitter chosen by rnd in [0, 1).
 * Not part of the package's API: exported for the tests only.
 *
 * @internal
 */
export function backoffDelay(attempt: number, rnd: () => number = Math.random): number {
  const base = attempt < 20 ? Math.min(BACKOFF_MIN_MS * 2 ** attempt, BACKOFF_MAX_MS) : BACKOFF_MAX_MS;
  return Math.round(base * (0.8 + 0.4 * rnd()));
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

/** readBody reads up to 64 KiB of an HTTP answer's text. */
export function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      if (size < 64 * 1024) chunks.push(c);
      size += c.length;
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8').trim()));
    res.on('error', () => resolve(Buffer.concat(chunks).toString('utf8').trim()));
  });
}
