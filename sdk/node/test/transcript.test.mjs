// Plays the agent-protocol transcripts of internal/agentproto/testdata/transcripts
// against this SDK: the same files drive core/transcript_test.go for the Go
// SDK. See the README there for the format.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { WebSocketServer } from 'ws';

import { Agent, defineTool } from '../dist/index.js';
import { memoryLogger, repoRoot } from './harness.mjs';

const dir = join(repoRoot, 'internal', 'agentproto', 'testdata', 'transcripts');
const WAIT_MS = 10_000;

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
    if (!['register', 'gateway', 'agent', 'do', 'drop', 'closed'].includes(s.kind)) throw new Error(`unknown section ${s.kind}`);
  }
  return steps;
}

/** contains returns where got does not contain want, or '' (see the README). */
function contains(want, got, path) {
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

/** transcriptAgent returns an agent offering the tools every transcript expects. */
function transcriptAgent(url) {
  const agent = new Agent({ apiKey: 'sfx_agent_test', url, logger: memoryLogger() });
  agent.register([
    defineTool({
      name: 'echo',
      description: 'Returns its text.',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
      handler: (args) => args.text,
    }),
    defineTool({
      name: 'fail',
      description: 'Fails.',
      inputSchema: { type: 'object' },
      handler: () => {
        throw new Error('it failed: ask again later');
      },
    }),
    defineTool({
      name: 'wait',
      description: 'Waits until cancelled.',
      inputSchema: { type: 'object' },
      handler: (_args, call) =>
        new Promise((_resolve, reject) => call.signal.addEventListener('abort', () => reject(call.signal.reason), { once: true })),
    }),
    defineTool({
      name: 'sleep',
      description: 'Sleeps 300 ms.',
      inputSchema: { type: 'object' },
      handler: () => new Promise((resolve) => setTimeout(() => resolve('slept'), 300)),
    }),
    defineTool({
      name: 'shaped',
      description: 'Returns a shaped result.',
      inputSchema: { type: 'object' },
      handler: () => ({ content: [{ type: 'text', text: 'shaped' }], isError: true }),
    }),
  ]);
  return agent;
}

async function play(steps) {
  const regs = queue();
  const conns = queue();
  let tickets = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => regs.push({ body, reply: (ticket) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ ticket, expiresInMs: 30000 })) }));
  });
  const wss = new WebSocketServer({ noServer: true });
  const sockets = [];
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const c = { ws, msgs: queue() };
      ws.on('message', (d) => c.msgs.push({ data: d.toString() }));
      ws.on('close', (code) => c.msgs.push({ closed: code }));
      sockets.push(ws);
      conns.push(c);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const agent = transcriptAgent(`http://127.0.0.1:${server.address().port}`);
  let started = false;
  let conn;
  let closing;
  const current = async () => (conn ??= await conns.shift('the agent to connect'));
  try {
    for (const [i, s] of steps.entries()) {
      const where = `step ${i + 1} (${s.kind})`;
      if (s.kind === 'register' && !started) {
        started = true;
        void agent.connect().catch(() => {});
      }
      switch (s.kind) {
        case 'register': {
          const reg = await regs.shift(`${where}: a registration`);
          reg.reply(`t-${++tickets}`);
          const d = contains(JSON.parse(s.body), JSON.parse(reg.body), 'registration');
          assert.equal(d, '', `${where}: ${d}\nbody: ${reg.body}`);
          conn = undefined;
          break;
        }
        case 'gateway': {
          const c = await current();
          c.ws.send(s.body);
          if (JSON.parse(s.body).type === 'goodbye') c.ws.close(1001, 'goodbye');
          break;
        }
        case 'agent': {
          const m = await (await current()).msgs.shift(`${where}: a message from the agent`);
          assert.ok(m.data !== undefined, `${where}: the connection closed (${m.closed})`);
          const d = contains(JSON.parse(s.body), JSON.parse(m.data), 'message');
          assert.equal(d, '', `${where}: ${d}\ngot: ${m.data}`);
          break;
        }
        case 'do': {
          const f = s.body.split(/\s+/);
          if (f.length === 3 && f[0] === 'setEnabled' && (f[2] === 'on' || f[2] === 'off')) await agent.setEnabled(f[1], f[2] === 'on');
          else if (f.length === 1 && f[0] === 'stop') closing = agent.close();
          else assert.fail(`${where}: unknown action ${s.body}`);
          break;
        }
        case 'drop':
          (await current()).ws.terminate();
          break;
        case 'closed': {
          const m = await (await current()).msgs.shift(`${where}: the connection to close`);
          assert.equal(m.closed, 1000, `${where}: got ${m.data ?? `close ${m.closed}`}, want the connection closed with 1000`);
          break;
        }
      }
    }
    await closing;
  } finally {
    await agent.close();
    for (const ws of sockets) ws.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

describe('agent-protocol transcripts', () => {
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.txtar')).sort()) {
    it(file.replace(/\.txtar$/, ''), async () => {
      await play(parseTranscript(readFileSync(join(dir, file), 'utf8')));
    });
  }
});
