import WebSocket from 'ws';
import type { IncomingMessage } from 'node:http';

import { backoffDelay } from './backoff.js';
import { startCall } from './calls.js';
import type { Prompt, Registrable, Resource, Tool } from './define.js';
import { handlerFor } from './handlers.js';
import { checkName } from './names.js';
import { type AgentOptions, consoleLogger, DEFAULT_DRAIN_TIMEOUT_MS, DEFAULT_URL, type Logger } from './options.js';
import { RefusedError, gatewayURLs, readBody, register, registrationBody } from './registration.js';
import { Session, type WireMessage } from './session.js';
import { SDK_VERSION } from './version.js';

export { PROTOCOL_VERSION, SDK_VERSION } from './version.js';
export { DEFAULT_DRAIN_TIMEOUT_MS, DEFAULT_URL } from './options.js';
export type { AgentOptions, Logger } from './options.js';

/** Bounds each step of opening a connection: the registration, the handshake, the wait for welcome. */
const OPEN_TIMEOUT_MS = 30_000;
const DEFAULT_HEARTBEAT_MS = 5_000;
const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/** How long close() keeps reading after the drain, for calls the gateway sent before it heard. */
const DRAIN_SETTLE_MS = 100;






/** The gateway said goodbye: it is going away, and the agent reconnects. */
class GoodbyeError extends Error {
  override name = 'GoodbyeError';
}

interface RegisteredTool {
  tool: Tool<any>;
  disabled: boolean;
}


interface Outcome {
  welcomed: boolean;
  error: Error;
}

/**
 * An Agent offers tools, resources and prompts to a Spacefix gateway.
 * Register everything, then connect:
 *
 * ```js
 * const agent = new Agent({ apiKey: process.env.SPACEFIX_API_KEY });
 * agent.register([getOrder, searchOrders, openOrders, summariseOrder]);
 * void agent.connect();
 * ```
 */
export class Agent {
  readonly #apiKey: string;
  readonly #registerURL: string;
  readonly #connectURL: string;
  readonly #opts: AgentOptions;
  readonly #log: Logger;
  readonly #drainTimeoutMs: number;

  readonly #tools = new Map<string, RegisteredTool>();
  readonly #resources = new Map<string, Resource>();
  readonly #prompts = new Map<string, Prompt<any>>();

  #started = false;
  #closed = false;
  #loop: Promise<void> | undefined;
  #closing: Promise<void> | undefined;
  #welcomed: Promise<void>;
  #resolveWelcomed!: () => void;
  readonly #stop = new AbortController();
  #wake: (() => void) | undefined;
  /** The connection being opened or served, if any. */
  #current: Session | undefined;
  /** The welcomed connection, if any: calls and set_enabled go there. */
  #session: Session | undefined;

  constructor(options: AgentOptions = {}) {
    const opts = { ...options };
    const apiKey = opts.apiKey || process.env.SPACEFIX_API_KEY || '';
    if (apiKey === '') {
      throw new TypeError(
        'new Agent: no API key: set apiKey or SPACEFIX_API_KEY to an agent key; create one with `spacefix keys create --kind agent`',
      );
    }
    if (opts.namespace && !opts.name) {
      throw new TypeError('new Agent: namespace needs a name: tools are exposed as <name>_<tool>');
    }
    const drain = opts.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
    if (typeof drain !== 'number' || !Number.isFinite(drain) || drain < 0) {
      throw new TypeError(`new Agent: drainTimeoutMs must be a number of milliseconds, 0 or more; got ${String(drain)}`);
    }
    this.#drainTimeoutMs = drain;
    const base = opts.url || process.env.SPACEFIX_URL || DEFAULT_URL;
    [this.#registerURL, this.#connectURL] = gatewayURLs(base);
    this.#apiKey = apiKey;
    this.#opts = opts;
    this.#log = opts.logger ?? consoleLogger;
    this.#welcomed = new Promise((resolve) => (this.#resolveWelcomed = resolve));
  }

  /**
   * register adds tools, resources and prompts, in any mix. A tool or prompt
   * with the name of one registered earlier replaces it, as does a resource
   * with the same URI. Register everything before connect(): what the agent
   * offers is sent when each connection opens. A name the gateway will
   * refuse is logged here; the gateway's refusal is logged again at each
   * attempt to connect.
   */
  register(items: Registrable | readonly Registrable[]): this {
    if (this.#started) {
      throw new Error('agent.register: the agent is already connected; register everything before connect()');
    }
    const list = Array.isArray(items) ? items : [items as Registrable];
    for (const item of list) {
      switch (item?.kind) {
        case 'tool':
          this.#warnName('tool', item.name);
          this.#tools.delete(item.name);
          this.#tools.set(item.name, { tool: item, disabled: false });
          break;
        case 'resource':
          this.#resources.delete(item.uri);
          this.#resources.set(item.uri, item);
          break;
        case 'prompt':
          this.#warnName('prompt', item.name);
          this.#prompts.delete(item.name);
          this.#prompts.set(item.name, item);
          break;
        default:
          throw new TypeError('agent.register: pass what defineTool, defineResource and definePrompt return');
      }
    }
    return this;
  }

  /**
   * connect registers with the gateway and opens the connection, then keeps
   * it open: when it fails or drops, running handlers are aborted and the
   * agent connects again, forever, with backoff (250 ms doubling to 30 s,
   * ±20 % jitter). Every failure is logged, with the gateway's reason when it
   * refused the registration. The promise resolves once the gateway has
   * welcomed the agent (or when close() is called first); it never rejects.
   */
  connect(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    if (!this.#started) {
      this.#started = true;
      this.#loop = this.#run();
    }
    return this.#welcomed;
  }

  /** True while the gateway has welcomed the agent's current connection. */
  get connected(): boolean {
    return this.#session !== undefined;
  }

  /**
   * close stops the agent without losing calls, as a rolling restart needs.
   * It tells the gateway to drain (send no new calls here), then keeps the
   * connection open while the calls already running finish, their signals
   * untouched, and keeps serving calls the gateway sent before it heard: at
   * least 100 ms, at most `drainTimeoutMs` (10 s). Then it aborts the
   * signals of handlers still running (their results are not sent), closes
   * the connection with status 1000 and stops reconnecting. It resolves when
   * all that is done. Safe to call more than once.
   */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#stop.abort(new Error('the agent is closing'));
      this.#wake?.();
      this.#resolveWelcomed();
      this.#closing = this.#stopSession(this.#current);
    }
    await this.#closing;
    await this.#loop;
  }

  /** #stopSession drains s if it is welcomed, then closes it. */
  async #stopSession(s: Session | undefined): Promise<void> {
    if (!s) return;
    if (s.welcomed && !s.isEnded) {
      try {
        await this.#drain(s);
      } catch (err) {
        this.#log.error(`spacefix: drain: ${asError(err).message}`); // a bug of ours: close anyway
      }
    }
    s.close(1000, 'the agent is stopping');
  }

  /**
   * #drain tells the gateway to send no new calls, then waits until no call
   * is running (and at least DRAIN_SETTLE_MS has passed, for calls sent
   * before the gateway heard), the connection ends, or the drain timeout.
   */
  async #drain(s: Session): Promise<void> {
    if (!(await s.send(JSON.stringify({ type: 'drain' })))) return; // gone: its calls end with it
    const start = Date.now();
    const limit = this.#drainTimeoutMs;
    const settle = Math.min(DRAIN_SETTLE_MS, limit);
    for (;;) {
      if (s.isEnded) return;
      const waited = Date.now() - start;
      if (s.calls.size === 0 && waited >= settle) return;
      if (waited >= limit) {
        this.#log.warn(
          `spacefix: ${s.calls.size} ${s.calls.size === 1 ? 'call was' : 'calls were'} still running ` +
            `${(limit / 1000).toFixed(1)} s after the drain; aborting ${s.calls.size === 1 ? 'it' : 'them'}`,
        );
        return;
      }
      await s.changed(s.calls.size === 0 ? settle - waited : limit - waited);
    }
  }

  /**
   * setEnabled switches a registered tool off or on in this replica: the
   * gateway lists a tool while at least one replica of the key has it on and
   * sends its calls only to those; other replicas keep their own setting;
   * clients get `notifications/tools/list_changed`. Before connect() it
   * decides how the tool is registered; while connected it is sent even when
   * the setting did not change; it holds across reconnects (a reconnecting
   * replica registers with it). The promise resolves once the change is sent (or remembered
   * for the next connection); an unknown name rejects.
   */
  async setEnabled(name: string, enabled: boolean): Promise<void> {
    const t = this.#tools.get(name);
    if (!t) throw new Error(`agent.setEnabled: no tool named ${JSON.stringify(name)} is registered`);
    t.disabled = !enabled;
    const s = this.#session;
    if (s) await s.send(JSON.stringify({ type: 'set_enabled', name, enabled: Boolean(enabled) }));
  }

  /**
   * resourceChanged tells the gateway that the resource at uri (registered,
   * or matched by a registered template) has changed: MCP clients subscribed
   * to it get notifications/resources/updated and read it again. It throws
   * when uri is not one of the agent's and when the agent is not connected
   * (nobody can be subscribed then). The gateway passes on at most 600 a
   * minute per replica.
   */
  async resourceChanged(uri: string): Promise<void> {
    const known = [...this.#resources.values()].some(
      (r) => r.uri === uri || (r.template === true && uri.startsWith(r.uri.slice(0, r.uri.indexOf('{')))),
    );
    if (!known) throw new Error(`agent.resourceChanged: no resource or template of this agent has the URI ${JSON.stringify(uri)}`);
    const s = this.#session;
    if (!s || !(await s.send(JSON.stringify({ type: 'resource_updated', name: uri })))) {
      throw new Error(`agent.resourceChanged: ${JSON.stringify(uri)} not sent: the agent is not connected`);
    }
  }

  /** The prompts (`prompt:<name>`) and resources (`resource:<uri>`) switched off. */
  readonly #off = new Set<string>();

  /**
   * setPromptEnabled switches a prompt off or back on at run time, as
   * setEnabled does for tools: it is listed while at least one live replica
   * has it on, and clients get notifications/prompts/list_changed.
   */
  async setPromptEnabled(name: string, enabled: boolean): Promise<void> {
    if (!this.#prompts.has(name)) throw new Error(`agent.setPromptEnabled: no prompt named ${JSON.stringify(name)} is registered`);
    await this.#switch('prompt', name, enabled);
  }

  /**
   * setResourceEnabled switches a resource (or a template, by its template)
   * off or back on at run time; clients get notifications/resources/list_changed.
   */
  async setResourceEnabled(uri: string, enabled: boolean): Promise<void> {
    if (!this.#resources.has(uri)) throw new Error(`agent.setResourceEnabled: no resource or template ${JSON.stringify(uri)} is registered`);
    await this.#switch('resource', uri, enabled);
  }

  async #switch(kind: 'prompt' | 'resource', name: string, enabled: boolean): Promise<void> {
    if (enabled) this.#off.delete(`${kind}:${name}`);
    else this.#off.add(`${kind}:${name}`);
    const s = this.#session;
    if (s) await s.send(JSON.stringify({ type: 'set_enabled', kind, name, enabled: Boolean(enabled) }));
  }

  #warnName(kind: 'tool' | 'prompt', name: string): void {
    const msg = checkName(kind, name);
    if (msg) this.#log.warn(`spacefix: ${msg} The gateway will refuse the connection until the name is fixed.`);
  }

  // Connection loop.

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#closed) {
      let outcome: Outcome;
      try {
        outcome = await this.#once();
      } catch (err) {
        outcome = { welcomed: false, error: asError(err) }; // a bug of ours: log it and go on
      }
      const { welcomed, error } = outcome;
      if (this.#closed) break;
      if (welcomed) attempt = 0;
      const delay = backoffDelay(attempt);
      attempt++;
      this.#logFailure(error, welcomed, attempt, delay);
      await this.#sleep(delay);
    }
    this.#resolveWelcomed();
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.#wake = () => {
        this.#wake = undefined;
        done();
      };
    });
  }

  #logFailure(err: Error, welcomed: boolean, attempt: number, delay: number): void {
    const when = `${(delay / 1000).toFixed(1)} s`;
    if (err instanceof GoodbyeError) {
      this.#log.info(`spacefix: the gateway is going away (reconnecting in ${when}): ${err.message}`);
    } else if (welcomed) {
      this.#log.warn(`spacefix: lost the connection to the gateway (reconnecting in ${when}): ${err.message}`);
    } else if (err instanceof RefusedError) {
      this.#log.error(`spacefix: the gateway refused the agent (retrying in ${when}, attempt ${attempt}): ${err.message}`);
    } else {
      this.#log.warn(`spacefix: cannot connect to the gateway (retrying in ${when}, attempt ${attempt}): ${err.message}`);
    }
  }

  /** #once opens one connection and serves it until it ends. */
  async #once(): Promise<Outcome> {
    const { body, disabled } = this.#registration();
    let ticket: string;
    try {
      ticket = await this.#register(body);
    } catch (err) {
      return { welcomed: false, error: asError(err) };
    }
    if (this.#closed) return { welcomed: false, error: new Error('the agent is closing') };
    return this.#serve(ticket, disabled);
  }

  #registration(): { body: string; disabled: Map<string, boolean> } {
    const disabled = new Map<string, boolean>();
    const tools = [...this.#tools.values()].map(({ tool, disabled: off }) => {
      disabled.set(tool.name, off);
      return { tool, disabled: off };
    });
    const body = registrationBody(this.#opts, tools, [...this.#resources.values()], [...this.#prompts.values()], this.#off);
    return { body, disabled };
  }

  /** #register posts the registration and returns the ticket to connect with. */
  #register(body: string): Promise<string> {
    return register(this.#registerURL, this.#apiKey, body, this.#stop.signal, OPEN_TIMEOUT_MS);
  }

  /** #serve opens the WebSocket with ticket and serves it until it closes. */
  #serve(ticket: string, registered: Map<string, boolean>): Promise<Outcome> {
    return new Promise((resolve) => {
      const ws = new WebSocket(`${this.#connectURL}?ticket=${encodeURIComponent(ticket)}`, {
        headers: { Authorization: `Bearer ${this.#apiKey}`, 'User-Agent': `spacefix-node/${SDK_VERSION}` },
        maxPayload: MAX_FRAME_BYTES,
        handshakeTimeout: OPEN_TIMEOUT_MS,
        perMessageDeflate: false,
      });
      const s = new Session(ws, this.#log);
      this.#current = s;
      let welcomeTimer: NodeJS.Timeout | undefined;

      ws.on('unexpected-response', (_req, res: IncomingMessage) => {
        readBody(res).then((text) => {
          s.fail(res.statusCode && res.statusCode >= 400 && res.statusCode < 500
            ? new RefusedError('connect', res.statusCode, text)
            : new Error(`connect: ${res.statusCode} ${res.statusMessage ?? ''}${text ? ': ' + text.slice(0, 300) : ''}`));
        });
      });
      ws.on('open', () => {
        welcomeTimer = setTimeout(
          () => s.fail(new Error(`connect: no welcome from the gateway within ${OPEN_TIMEOUT_MS / 1000} s`)),
          OPEN_TIMEOUT_MS,
        );
      });
      ws.on('message', (data, isBinary) => {
        let m: WireMessage;
        try {
          m = JSON.parse(isBinary ? Buffer.from(data as Buffer).toString('utf8') : data.toString());
        } catch (err) {
          this.#log.warn(`spacefix: ignoring a message that is not JSON: ${asError(err).message}`);
          return;
        }
        if (!m || typeof m !== 'object') return;
        if (!s.welcomed) {
          if (m.type !== 'welcome' || !m.welcome) {
            s.fail(new Error(`connect: the gateway's first message is ${JSON.stringify(m.type)}, not a welcome`));
            return;
          }
          clearTimeout(welcomeTimer);
          this.#onWelcome(s, m.welcome, registered);
          return;
        }
        switch (m.type) {
          case 'call':
            this.#startCall(s, m);
            break;
          case 'cancel':
            s.cancel(m.id, m.reason);
            break;
          case 'confirmed':
            s.confirmed(m);
            break;
          case 'answered':
            s.answered(m);
            break;
          case 'goodbye':
            s.fail(new GoodbyeError(m.message || 'goodbye'));
            break;
        }
      });
      ws.on('pong', () => s.pong());
      ws.on('error', (err) => s.fail(new Error(`connection: ${err.message}`), false));
      ws.on('close', (code, reason) => {
        clearTimeout(welcomeTimer);
        s.ended();
        if (this.#session === s) this.#session = undefined;
        if (this.#current === s) this.#current = undefined;
        const why = reason.toString();
        resolve({
          welcomed: s.welcomed,
          error: s.error ?? new Error(`the gateway closed the connection (${code}${why ? ' ' + why : ''})`),
        });
      });
    });
  }

  #onWelcome(s: Session, w: NonNullable<WireMessage['welcome']>, registered: Map<string, boolean>): void {
    s.welcomed = true;
    this.#session = s;
    s.startHeartbeat(w.heartbeatMs && w.heartbeatMs > 0 ? w.heartbeatMs : DEFAULT_HEARTBEAT_MS);
    this.#log.info(
      `spacefix: connected to the gateway (project ${w.project ?? '?'}, replica ${w.replica ?? '?'}, ` +
        `${count(this.#tools.size, 'tool')}, ${count(this.#resources.size, 'resource')}, ${count(this.#prompts.size, 'prompt')})`,
    );
    // Tell the gateway of setEnabled calls made since the registration was taken.
    for (const [name, t] of this.#tools) {
      const was = registered.get(name);
      if (was !== undefined && was !== t.disabled) {
        void s.send(JSON.stringify({ type: 'set_enabled', name, enabled: !t.disabled }));
      }
    }
    this.#resolveWelcomed();
  }

  // Calls.

  #startCall(s: Session, m: WireMessage): void {
    const reg = { tools: this.#tools, resources: this.#resources, prompts: this.#prompts };
    startCall(s, m, (kind, name, args) => handlerFor(reg, kind, name, args), this.#log, this.#opts.name ?? '');
  }
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/** count writes "1 tool" or "2 tools". */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
