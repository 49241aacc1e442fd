// The transcript player: it plays the gateway's side of an agent-protocol
// transcript (core/internal/agentproto/testdata/transcripts, README there for the
// format) against one agent, and checks what the agent sends. The shared
// transcripts and the SDK's own inline ones (with actions that look inside
// the agent) both run on it: it is the only gateway the wire tests talk to.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';

import { Agent } from '../dist/index.js';
import { memoryLogger } from './harness.mjs';

export const WAIT_MS = 10_000;

/** The agent key the player accepts. */
export const TEST_KEY = 'sfx_agent_test';

const SECTIONS = ['register', 'refuse', 'gateway', 'agent', 'do', 'drop', 'deaf', 'closed'];

/** parseTranscript reads the txtar sections of a transcript. */
export function parseTranscript(text) {
  const steps = [];
  for (const line of text.split('\n')) {
    const m = /^-- (.+) --\r?$/.exec(line);
    if (m) steps.push({ kind: m[1].trim(), body: '' });
    else if (steps.length > 0) steps.at(-1).body += line + '\n';
  }
  for (const s of steps) {
    s.body = s.body.trim();
    if (!SECTIONS.includes(s.kind)) throw new Error(`unknown section ${s.kind}`);
  }
  return steps;
}

/** welcome is the gateway's welcome of replica r with a heartbeat of ms. */
export function welcome(r = 'r-1', heartbeatMs = 5000) {
  return JSON.stringify({ type: 'welcome', welcome: { protocol: 1, replica: r, project: 'p-test', agent: 'key-test', callWaitMs: 30000, heartbeatMs } });
}

/** connected starts most inline transcripts: a registration and the welcome. */
export const connected = `
-- register --
{"protocol":1}
-- gateway --
${welcome()}
`;

/** contains returns where got does not contain want, or '' (see the README). */
export function contains(want, got, path) {
  if (Array.isArray(want)) {
    if (!Array.isArray(got) || got.length !== want.length) return `${path}: got ${JSON.stringify(got)}, want ${want.length} items`;
    for (let i = 0; i < want.length; i++) {
      const d = contains(want[i], got[i], `${path}[${i}]`);
      if (d) return d;
    }
    return '';
  }
  if (want !== null && typeof want === 'object') {
    if (got === null || typeof got !== 'object' || Array.isArray(got)) return `${path}: got ${JSON.stringify(got)}, want an object`;
    for (const [k, v] of Object.entries(want)) {
      if (!(k in got)) return `${path}.${k}: missing`;
      const d = contains(v, got[k], `${path}.${k}`);
      if (d) return d;
    }
    return '';
  }
  return want === got ? '' : `${path}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`;
}

/** A queue whose shift waits, up to WAIT_MS, for an item. */
function queue() {
  const items = [];
  const waiters = [];
  return {
    push(v) {
      const w = waiters.shift();
      if (w) w(v);
      else items.push(v);
    },
    shift(what) {
      if (items.length > 0) return Promise.resolve(items.shift());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), WAIT_MS);
        waiters.push((v) => {
          clearTimeout(timer);
          resolve(v);
        });
      });
    },
  };
}

/** absoluteDeadline turns a relative call deadline ("+100ms", "+30s") into Unix milliseconds. */
function absoluteDeadline(body, where) {
  const m = JSON.parse(body);
  if (typeof m.deadline !== 'string') return m;
  const r = /^\+(\d+)(ms|s|m)$/.exec(m.deadline);
  assert.ok(r, `${where}: deadline ${m.deadline}: want a number or +duration`);
  m.deadline = Date.now() + Number(r[1]) * { ms: 1, s: 1000, m: 60_000 }[r[2]];
  return m;
}

/**
 * player starts a scripted gateway on 127.0.0.1. Close it when the test ends.
 * registrations lists every registration ({ auth, body }); sent(id) is the
 * call message with that id as sent.
 */
export async function player() {
  const regs = queue();
  const conns = queue();
  const registrations = [];
  const calls = new Map();
  const tickets = new Set();
  let deafTicket = 0; // the registration whose connection answers no ping
  const server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/agent/register') {
      res.writeHead(404).end('not found');
      return;
    }
    if (req.headers.authorization !== `Bearer ${TEST_KEY}`) {
      res.writeHead(401, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Unknown agent key.\n');
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      registrations.push({ auth: req.headers.authorization, body: JSON.parse(body) });
      const n = registrations.length;
      regs.push({
        body,
        reply: (status, text) => {
          if (status) {
            res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(text + '\n');
            return;
          }
          tickets.add(`t-${n}`);
          res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ ticket: `t-${n}`, expiresInMs: 30000 }));
        },
      });
    });
  });
  // Pongs are answered by hand, so that a deaf connection answers none.
  const wss = new WebSocketServer({ noServer: true, autoPong: false });
  const sockets = [];
  server.on('upgrade', (req, socket, head) => {
    const ticket = new URL(req.url, 'http://x').searchParams.get('ticket');
    if (!tickets.delete(ticket) || req.headers.authorization !== `Bearer ${TEST_KEY}`) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\n\r\nUnknown or used ticket.\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const c = { ws, msgs: queue(), n: Number(ticket.slice(2)) };
      ws.on('ping', (d) => c.n === deafTicket || ws.pong(d));
      ws.on('message', (d) => c.msgs.push({ data: d.toString() }));
      ws.on('close', (code, reason) => c.msgs.push({ closed: code, reason: reason.toString() }));
      sockets.push(ws);
      conns.push(c);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;

  /**
   * play plays steps against agent, which must use url and TEST_KEY. The
   * agent connects at the first register or refuse step. A "do" line other
   * than the shared ones (setEnabled, stop) calls actions[first word] with
   * the rest of the line and { ws, agent }, and waits for it. An "agent"
   * step with a check function calls it with the parsed message instead of
   * the containment check. play waits for a "stop" to finish.
   */
  async function play(agent, steps, actions = {}) {
    let started = false;
    let conn;
    let closing;
    const current = async () => (conn ??= await conns.shift('the agent to connect'));
    for (const [i, s] of steps.entries()) {
      const where = `step ${i + 1} (${s.kind})`;
      if ((s.kind === 'register' || s.kind === 'refuse') && !started) {
        started = true;
        void agent.connect().catch(() => {});
      }
      switch (s.kind) {
        case 'register': {
          const reg = await regs.shift(`${where}: a registration`);
          reg.reply();
          const d = contains(JSON.parse(s.body), JSON.parse(reg.body), 'registration');
          assert.equal(d, '', `${where}: ${d}\nbody: ${reg.body}`);
          conn = undefined;
          break;
        }
        case 'refuse': {
          const reg = await regs.shift(`${where}: a registration`);
          const m = /^(\d+) (.*)$/s.exec(s.body);
          assert.ok(m, `${where}: want a status and a text, got ${s.body}`);
          reg.reply(Number(m[1]), m[2]);
          break;
        }
        case 'deaf':
          deafTicket = registrations.length;
          break;
        case 'gateway': {
          const c = await current();
          const m = absoluteDeadline(s.body, where);
          if (m.type === 'call') calls.set(m.id, m);
          c.ws.send(JSON.stringify(m));
          if (m.type === 'goodbye') c.ws.close(1001, 'goodbye');
          break;
        }
        case 'agent': {
          const m = await (await current()).msgs.shift(`${where}: a message from the agent`);
          assert.ok(m.data !== undefined, `${where}: the connection closed (${m.closed})`);
          if (s.check) await s.check(JSON.parse(m.data));
          else {
            const d = contains(JSON.parse(s.body), JSON.parse(m.data), 'message');
            assert.equal(d, '', `${where}: ${d}\ngot: ${m.data}`);
          }
          break;
        }
        case 'do': {
          const f = s.body.split(/\s+/);
          if (f.length === 3 && f[0] === 'setEnabled' && (f[2] === 'on' || f[2] === 'off')) await agent.setEnabled(f[1], f[2] === 'on');
          else if (f.length === 1 && f[0] === 'stop') closing = agent.close();
          else if (actions[f[0]]) await actions[f[0]](s.body.slice(f[0].length).trim(), { ws: conn?.ws, agent });
          else assert.fail(`${where}: unknown action ${s.body}`);
          break;
        }
        case 'drop':
          (await current()).ws.terminate();
          break;
        case 'closed': {
          const m = await (await current()).msgs.shift(`${where}: the connection to close`);
          assert.equal(m.closed, 1000, `${where}: got ${m.data ?? `close ${m.closed}`}, want the connection closed with 1000`);
          if (s.body) assert.equal(m.reason, s.body, `${where}: the close reason`);
          break;
        }
      }
    }
    await closing;
  }

  return {
    url,
    registrations,
    play,
    sent: (id) => calls.get(id),
    async close() {
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

// Helpers of the tests that play inline transcripts.

/** script parses an inline transcript. */
export function script(text) {
  return parseTranscript(text);
}

/**
 * stopped ends a transcript: once welcomed (the action connected), the
 * agent closes: it drains and closes the connection.
 */
export const stopped = `
-- do --
connected
-- do --
stop
-- agent --
{"type":"drain"}
-- closed --
`;

/** exactly is an "agent" step whose message must deep-equal want. */
export function exactly(want) {
  return { kind: 'agent', body: '', check: (got) => assert.deepEqual(got, want) };
}

/** setup starts a player and an agent pointed at it; both end with the test. */
export async function setup(t, opts = {}) {
  const gw = await player();
  t.after(() => gw.close());
  const logger = memoryLogger();
  const agent = new Agent({ apiKey: TEST_KEY, url: gw.url, logger, ...opts });
  t.after(() => agent.close());
  return { gw, agent, logger };
}

/** sleep waits ms; only where a test checks that something has not happened yet. */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** gate returns a promise and the function that resolves it. */
export function gate() {
  let open;
  const p = new Promise((r) => (open = r));
  return [p, open];
}
