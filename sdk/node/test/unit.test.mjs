// Unit tests: what the SDK does on its own, and on the wire against the
// transcript player (player.mjs), with inline transcripts. Behaviour through
// the real gateway is in gateway.test.mjs.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';

import { type } from 'arktype';
import { z } from 'zod';

import { Agent, CannotConfirmError, checkName, definePrompt, defineResource, defineTool, isCannotConfirm, toJSONSchema, toolError, toolImage, toolText } from '../dist/index.js';
import { gatewayURLs } from '../dist/registration.js';
import { ProgressThrottle } from '../dist/progress.js';
import { memoryLogger, waitFor } from './harness.mjs';
import { connected, parseTranscript, player, TEST_KEY, welcome } from './player.mjs';

describe('names', () => {
  it('words a refused name as the gateway does', () => {
    assert.equal(checkName('tool', 'get_order'), undefined);
    assert.equal(checkName('tool', 'A-z_09'), undefined);
    assert.equal(checkName('tool', 'x'.repeat(64)), undefined);
    assert.equal(checkName('tool', 'get order'), 'Invalid tool name "get order".');
    assert.equal(checkName('tool', 'orders.get'), 'Invalid tool name "orders.get".');
    assert.equal(checkName('tool', ''), 'Invalid tool name "".');
    assert.equal(checkName('prompt', 'x'.repeat(65)), `Invalid prompt name "${'x'.repeat(65)}".`);
    assert.equal(
      checkName('tool', 'github__search'),
      'Invalid tool name "github__search": names containing "__" are reserved for bridged MCP servers.',
    );
  });

  it('logs a bad name at registration and still registers it (the gateway refuses it)', () => {
    const logger = memoryLogger();
    const agent = new Agent({ apiKey: 'sfx_agent_x', logger });
    agent.register(defineTool({ name: 'get order', description: 'd', inputSchema: { type: 'object' }, handler: () => 1 }));
    assert.deepEqual(logger.lines, [
      { level: 'warn', msg: 'spacefix: Invalid tool name "get order". The gateway will refuse the connection until the name is fixed.' },
    ]);
  });
});

describe('options', () => {
  it('needs an API key', (t) => {
    const saved = process.env.SPACEFIX_API_KEY;
    delete process.env.SPACEFIX_API_KEY;
    t.after(() => saved !== undefined && (process.env.SPACEFIX_API_KEY = saved));
    assert.throws(() => new Agent(), {
      message: 'new Agent: no API key: set apiKey or SPACEFIX_API_KEY to an agent key; create one with `spacefix keys create --kind agent`',
    });
  });

  it('reads SPACEFIX_API_KEY and SPACEFIX_URL', async (t) => {
    const gw = await player();
    t.after(() => gw.close());
    const saved = [process.env.SPACEFIX_API_KEY, process.env.SPACEFIX_URL];
    process.env.SPACEFIX_API_KEY = TEST_KEY;
    process.env.SPACEFIX_URL = gw.url;
    t.after(() => {
      [process.env.SPACEFIX_API_KEY, process.env.SPACEFIX_URL] = saved;
      if (saved[0] === undefined) delete process.env.SPACEFIX_API_KEY;
      if (saved[1] === undefined) delete process.env.SPACEFIX_URL;
    });
    const agent = new Agent({ logger: memoryLogger() });
    await gw.play(agent, script(connected + stopped), { connected: () => agent.connect() });
    assert.equal(gw.registrations[0].auth, `Bearer ${TEST_KEY}`);
  });

  it('needs a name for a namespace', () => {
    assert.throws(() => new Agent({ apiKey: 'k', namespace: true }), {
      message: 'new Agent: namespace needs a name: tools are exposed as <name>_<tool>',
    });
  });

  it('derives both endpoints from the base URL', () => {
    assert.deepEqual(gatewayURLs('http://127.0.0.1:8080'), ['http://127.0.0.1:8080/v1/agent/register', 'ws://127.0.0.1:8080/v1/agent']);
    assert.deepEqual(gatewayURLs('https://gw.example.com/spacefix/'), [
      'https://gw.example.com/spacefix/v1/agent/register',
      'wss://gw.example.com/spacefix/v1/agent',
    ]);
    assert.throws(() => gatewayURLs('ftp://x'), { message: 'new Agent: gateway URL "ftp://x": use http:// or https://' });
  });
});

describe('schemas', () => {
  it('converts Zod 4 as z.toJSONSchema(schema, { io: "input" }): defaults are optional', () => {
    const schema = z.object({
      customer: z.string().describe('Customer handle, for example "ada"'),
      status: z.enum(['open', 'shipped', 'cancelled']).optional(),
      limit: z.number().int().min(1).max(50).default(10),
    });
    const got = toJSONSchema(schema, 'test');
    const { $schema, ...want } = z.toJSONSchema(schema, { io: 'input' });
    assert.equal($schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.deepEqual(got, want);
    assert.deepEqual(got.required, ['customer']);
  });

  it('converts a Zod 4 schema from a release without ~standard.jsonSchema (before 4.2) with Zod\'s own converter', () => {
    const schema = z.object({ id: z.string(), limit: z.number().default(10) });
    const { jsonSchema, ...std } = schema['~standard'];
    const older = { _zod: schema._zod, '~standard': std };
    assert.equal(older['~standard'].jsonSchema, undefined);
    assert.deepEqual(toJSONSchema(older, 'test'), toJSONSchema(schema, 'test'));
  });

  it('converts a Standard Schema with ~standard.jsonSchema (ArkType)', () => {
    const got = toJSONSchema(type({ id: 'string', 'count?': '1<=number<=5' }), 'test');
    assert.deepEqual(got, {
      type: 'object',
      properties: { id: { type: 'string' }, count: { type: 'number', minimum: 1, maximum: 5 } },
      required: ['id'],
    });
  });

  it('copies plain JSON Schema once, at definition', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } } };
    const tool = defineTool({ name: 'n', description: 'd', inputSchema: schema, handler: () => 1 });
    schema.properties.n.type = 'string';
    assert.deepEqual(tool.inputSchema, { type: 'object', properties: { n: { type: 'integer' } } });
  });

  it('refuses a Standard Schema that cannot describe itself as JSON Schema', () => {
    const opaque = { '~standard': { version: 1, vendor: 'acme', validate: () => ({ value: {} }) } };
    assert.throws(() => defineTool({ name: 'x', description: 'd', inputSchema: opaque, handler: () => 1 }), {
      message: /^defineTool "x": the acme schema cannot describe itself as JSON Schema/,
    });
  });

  it('names the tool when a Zod type has no JSON Schema form', () => {
    assert.throws(() => defineTool({ name: 'when', description: 'd', inputSchema: z.object({ at: z.date() }), handler: () => 1 }), {
      message: /^defineTool "when": the zod schema cannot be converted to JSON Schema: /,
    });
  });

  it('reads prompt arguments from the schema: names, descriptions, required', () => {
    const p = definePrompt({
      name: 'summarise_order',
      title: 'Summarise an order',
      description: 'd',
      argsSchema: z.object({ id: z.string().describe('The order id'), tone: z.string().optional() }),
      handler: () => 'x',
    });
    assert.deepEqual(p.arguments, [{ name: 'id', description: 'The order id', required: true }, { name: 'tone' }]);
  });
});

describe('results', () => {
  it('builds text, image and error results', () => {
    assert.deepEqual(toolText('hi'), { content: [{ type: 'text', text: 'hi' }] });
    assert.deepEqual(toolImage('iVBO', 'image/png', 'a dot'), {
      content: [
        { type: 'image', data: 'iVBO', mimeType: 'image/png' },
        { type: 'text', text: 'a dot' },
      ],
    });
    assert.deepEqual(toolImage('iVBO', 'image/png'), { content: [{ type: 'image', data: 'iVBO', mimeType: 'image/png' }] });
    assert.deepEqual(toolError('no'), { content: [{ type: 'text', text: 'no' }], isError: true });
  });

  it('defaults a resource to application/json', () => {
    assert.equal(defineResource({ uri: 'orders://open', name: 'Open', handler: () => [] }).mimeType, 'application/json');
    assert.throws(() => defineResource({ uri: 'open orders', name: 'Open', handler: () => [] }), {
      message: 'defineResource "open orders": uri must be an absolute URI such as orders://open',
    });
  });
});

describe('progress throttle', () => {
  it('sends 4 a second, holds back extra lines, the latest wins, nothing after stop', (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
    const sent = [];
    const th = new ProgressThrottle((l) => sent.push([Date.now(), l]), () => Date.now());
    for (let i = 1; i <= 7; i++) th.line(`line ${i}`);
    assert.deepEqual(sent.map(([, l]) => l), ['line 1', 'line 2', 'line 3', 'line 4']);
    t.mock.timers.tick(999);
    assert.equal(sent.length, 4);
    t.mock.timers.tick(1);
    assert.deepEqual(sent.at(-1), [1000, 'line 7']);
    // Lines sent at 0 ms are a second old at 1000 ms: three more may go.
    th.line('x'.repeat(250));
    assert.deepEqual(sent.at(-1), [1000, 'x'.repeat(200)]);
    th.line('a');
    th.line('b');
    assert.equal(sent.length, 8);
    th.line('held');
    assert.equal(sent.length, 8);
    th.stop(); // the result went out: the held line never follows it
    t.mock.timers.tick(5000);
    assert.equal(sent.length, 8);
  });

  it('cuts lines to 200 characters, not UTF-16 units', () => {
    const sent = [];
    new ProgressThrottle((l) => sent.push(l)).line('€'.repeat(201) + '😀');
    assert.equal(sent[0], '€'.repeat(200));
    const emoji = [];
    new ProgressThrottle((l) => emoji.push(l)).line('😀'.repeat(201));
    assert.equal(Array.from(emoji[0]).length, 200);
  });
});

/** script parses an inline transcript. */
function script(text) {
  return parseTranscript(text);
}

/**
 * stopped ends a transcript: once welcomed (the action connected), the
 * agent closes: it drains and closes the connection.
 */
const stopped = `
-- do --
connected
-- do --
stop
-- agent --
{"type":"drain"}
-- closed --
`;

/** exactly is an "agent" step whose message must deep-equal want. */
function exactly(want) {
  return { kind: 'agent', body: '', check: (got) => assert.deepEqual(got, want) };
}

/** setup starts a player and an agent pointed at it; both end with the test. */
async function setup(t, opts = {}) {
  const gw = await player();
  t.after(() => gw.close());
  const logger = memoryLogger();
  const agent = new Agent({ apiKey: TEST_KEY, url: gw.url, logger, ...opts });
  t.after(() => agent.close());
  return { gw, agent, logger };
}

/** sleep waits ms; only where a test checks that something has not happened yet. */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('wire behaviour (transcript player)', () => {
  it('sends the registration of the protocol, with the options and replacing same names', async (t) => {
    const { gw, agent } = await setup(t, { name: 'orders', displayName: 'Orders', author: 'Ada', namespace: true, instance: 'eu-1', version: '1.4.2' });
    const handler = () => 1;
    agent.register([
      defineTool({ name: 'get_order', description: 'first', inputSchema: { type: 'object' }, handler }),
      defineResource({ uri: 'orders://open', name: 'Open orders', handler }),
      definePrompt({ name: 'summarise_order', description: 'p1', argsSchema: z.object({ id: z.string() }), handler }),
    ]);
    agent.register([
      defineTool({
        name: 'get_order', title: 'Get an order', description: 'second', inputSchema: z.object({ id: z.string() }),
        annotations: { readOnlyHint: true }, timeoutMs: 60000, handler,
      }),
      defineResource({ uri: 'orders://open', name: 'Open orders 2', description: 'now', mimeType: 'text/plain', handler }),
      definePrompt({ name: 'summarise_order', title: 'Summarise', description: 'p2', handler }),
    ]);
    await gw.play(agent, script(connected + stopped), { connected: () => agent.connect() });
    assert.equal(gw.registrations[0].auth, `Bearer ${TEST_KEY}`);
    assert.deepEqual(gw.registrations[0].body, {
      protocol: 1, sdk: 'node/0.1.0', name: 'orders', namespace: true, instance: 'eu-1', version: '1.4.2',
      displayName: 'Orders', author: 'Ada',
      tools: [{
        name: 'get_order', title: 'Get an order', description: 'second',
        inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
        annotations: { readOnlyHint: true }, timeoutMs: 60000,
      }],
      resources: [{ uri: 'orders://open', name: 'Open orders 2', description: 'now', mimeType: 'text/plain' }],
      prompts: [{ name: 'summarise_order', title: 'Summarise', description: 'p2' }],
    });
  });

  it('refuses registration after connect', async (t) => {
    const { gw, agent } = await setup(t);
    await gw.play(agent, script(connected + '\n-- do --\nregister\n'), {
      register: async () => {
        await agent.connect();
        assert.throws(() => agent.register([]), { message: 'agent.register: the agent is already connected; register everything before connect()' });
      },
    });
  });

  it('closes a connection whose pongs stop and connects again', async (t) => {
    const { gw, agent, logger } = await setup(t);
    await gw.play(agent, script(`
-- register --
{"protocol":1}
-- deaf --
-- gateway --
${welcome('r-1', 100)}
-- register --
{"protocol":1}
-- do --
logged
`), {
      logged: () =>
        waitFor(() => logger.lines.some((l) => l.level === 'warn' && /^spacefix: lost the connection to the gateway \(reconnecting in 0\.[23] s\): no pong from the gateway within 100 ms$/.test(l.msg)), {
          what: 'the lost connection in the log',
        }),
    });
  });

  it('answers pings and stays connected while pongs come', async (t) => {
    const { gw, agent } = await setup(t);
    await gw.play(agent, script(`
-- register --
{"protocol":1}
-- gateway --
${welcome('r-1', 50)}
-- do --
ping
`), {
      ping: async (_arg, { ws }) => {
        await agent.connect();
        let pongs = 0;
        ws.on('pong', () => pongs++);
        let pings = 0;
        ws.on('ping', () => pings++);
        for (let i = 0; i < 5; i++) ws.ping();
        await waitFor(() => pongs === 5 && pings >= 5, { what: 'five pongs and five pings' });
        assert.equal(gw.registrations.length, 1);
        assert.equal(agent.connected, true);
      },
    });
  });

  it('aborts at the deadline and does not send the late result', async (t) => {
    const { gw, agent } = await setup(t);
    let reason;
    agent.register([
      defineTool({
        name: 'slow', description: 'd', inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reason = call.signal.reason;
          return 'late';
        },
      }),
      defineTool({ name: 'echo', description: 'd', inputSchema: { type: 'object' }, handler: (args) => args }),
    ]);
    // Messages on one socket arrive in order: the next one is echo's
    // result, so no result for c-1 came first.
    await gw.play(agent, [
      ...script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"slow","args":{},"deadline":"+100ms"}
-- do --
aborted
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"echo","args":{"a":1},"deadline":"+5s"}
`),
      exactly({ type: 'result', id: 'c-2', result: { content: [{ type: 'text', text: '{"a":1}' }] } }),
    ], {
      aborted: async () => {
        await waitFor(() => reason, { what: 'the deadline to abort the signal' });
        assert.equal(reason.name, 'TimeoutError');
        assert.equal(reason.message, "The call's deadline passed: the gateway has given up on it.");
      },
    });
  });

  it('gives the handler the trace context of the call message, and none that is malformed', async (t) => {
    const { gw, agent } = await setup(t);
    const seen = {};
    agent.register([
      defineTool({
        name: 'trace', description: 'd', inputSchema: { type: 'object' },
        handler: (_args, call) => {
          seen[call.callId] = { traceparent: call.traceparent, tracestate: call.tracestate };
          return 'ok';
        },
      }),
    ]);
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await gw.play(agent, script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"trace","args":{},"traceparent":"${tp}","tracestate":"sfx=1"}
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"trace","args":{}}
-- gateway --
{"type":"call","id":"c-3","kind":"tool","name":"trace","args":{},"traceparent":"not-a-traceparent","tracestate":"sfx=1"}
-- agent --
{"type":"result","id":"c-1"}
-- agent --
{"type":"result","id":"c-2"}
-- agent --
{"type":"result","id":"c-3"}
`));
    assert.deepEqual(seen, {
      'c-1': { traceparent: tp, tracestate: 'sfx=1' },
      'c-2': { traceparent: '', tracestate: '' },
      'c-3': { traceparent: '', tracestate: '' },
    });
  });

  it('aborts on cancel, and on disconnect, and sends nothing for either', async (t) => {
    const { gw, agent } = await setup(t);
    const reasons = {};
    const started = new Set();
    agent.register([
      defineTool({
        name: 'wait', description: 'd', inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          started.add(call.callId);
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reasons[call.callId] = call.signal.reason.message;
          return 'late';
        },
      }),
      defineTool({ name: 'echo', description: 'd', inputSchema: { type: 'object' }, handler: (args) => args }),
    ]);
    await gw.play(agent, [
      ...script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"wait","args":{}}
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"wait","args":{}}
-- gateway --
{"type":"cancel","id":"c-1","reason":"cancelled"}
-- gateway --
{"type":"cancel","id":"c-2","reason":"timeout"}
-- do --
cancelled
-- gateway --
{"type":"call","id":"c-3","kind":"tool","name":"echo","args":{}}
`),
      // The next message is c-3's: nothing was sent for c-1 or c-2.
      exactly({ type: 'result', id: 'c-3', result: { content: [{ type: 'text', text: '{}' }] } }),
      ...script(`
-- gateway --
{"type":"call","id":"c-4","kind":"tool","name":"wait","args":{}}
-- do --
started c-4
-- drop --
-- do --
disconnected
`),
    ], {
      cancelled: async () => {
        await waitFor(() => reasons['c-1'] && reasons['c-2'], { what: 'both signals to abort' });
        assert.equal(reasons['c-1'], 'The client cancelled the call.');
        assert.equal(reasons['c-2'], "The call's wait expired: the gateway has given up on it.");
      },
      started: (id) => waitFor(() => started.has(id), { what: `call ${id} to start` }),
      disconnected: async () => {
        await waitFor(() => reasons['c-4'], { what: 'the disconnect to abort the signal' });
        assert.equal(reasons['c-4'], 'The connection to the gateway ended.');
      },
    });
  });

  it('answers a call for something it does not offer with an error', async (t) => {
    const { gw, agent } = await setup(t);
    await gw.play(agent, [
      ...script(connected + `
-- gateway --
{"type":"call","id":"c-9","kind":"tool","name":"nope","args":{}}
`),
      exactly({ type: 'error', id: 'c-9', message: 'This agent has no tool "nope".' }),
    ]);
  });

  it('registers a tool switched off before connect, and sends set_enabled while connected', async (t) => {
    const { gw, agent } = await setup(t);
    agent.register([defineTool({ name: 'run_tests', description: 'd', inputSchema: { type: 'object' }, handler: () => 1 })]);
    await agent.setEnabled('run_tests', false);
    await gw.play(agent, [
      ...script(`
-- register --
{"tools":[{"name":"run_tests","disabled":true}]}
-- gateway --
${welcome()}
-- do --
connected
-- do --
setEnabled run_tests on
`),
      exactly({ type: 'set_enabled', name: 'run_tests', enabled: true }),
    ], { connected: () => agent.connect() });
    await assert.rejects(agent.setEnabled('nope', true), { message: 'agent.setEnabled: no tool named "nope" is registered' });
  });

  it('sends set_enabled for its own replica even when the setting did not change', async (t) => {
    const { gw, agent } = await setup(t);
    agent.register([defineTool({ name: 'run_tests', description: 'd', inputSchema: { type: 'object' }, handler: () => 1 })]);
    await gw.play(agent, [
      ...script(connected + `
-- do --
connected
-- do --
setEnabled run_tests on
-- do --
setEnabled run_tests off
-- do --
setEnabled run_tests off
`),
      exactly({ type: 'set_enabled', name: 'run_tests', enabled: true }),
      exactly({ type: 'set_enabled', name: 'run_tests', enabled: false }),
      exactly({ type: 'set_enabled', name: 'run_tests', enabled: false }),
    ], { connected: () => agent.connect() });
  });

  it('logs a refused registration with the gateway text and retries with backoff', async (t) => {
    const { gw, agent, logger } = await setup(t);
    await gw.play(agent, script(`
-- refuse --
400 Invalid tool name "get order".
-- refuse --
400 Invalid tool name "get order".
-- refuse --
400 Invalid tool name "get order".
`));
    await agent.close(); // connect() resolves on close; never rejects
    const refusals = logger.lines.filter((l) => l.level === 'error');
    assert.ok(refusals.length >= 2, JSON.stringify(logger.lines));
    assert.match(
      refusals[0].msg,
      /^spacefix: the gateway refused the agent \(retrying in 0\.[23] s, attempt 1\): register: 400 Bad Request: Invalid tool name "get order"\.$/,
    );
    assert.match(refusals[1].msg, /^spacefix: the gateway refused the agent \(retrying in 0\.[4-6] s, attempt 2\): register: 400 /);
  });
});

/** gate returns a promise and the function that resolves it. */
function gate() {
  let open;
  const p = new Promise((r) => (open = r));
  return [p, open];
}

describe('process exit', () => {
  it('lets a process whose agent was closed exit on its own, holding no socket or timer', async (t) => {
    const gw = await player();
    t.after(() => gw.close());
    const index = new URL('../dist/index.js', import.meta.url).href;
    const child = spawn(process.execPath, ['--input-type=module', '-e', `
      import { Agent } from ${JSON.stringify(index)};
      const quiet = { info() {}, warn() {}, error() {} };
      const agent = new Agent({ apiKey: ${JSON.stringify(TEST_KEY)}, url: process.argv[1], logger: quiet });
      await agent.connect();
      await agent.close();
      setImmediate(() => console.log(JSON.stringify(process.getActiveResourcesInfo())));
    `, gw.url], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    // The agent lives in the child: the player only needs to know it connects by itself.
    await gw.play({ connect: async () => {}, close: async () => {} }, script(connected + `
-- agent --
{"type":"drain"}
-- closed --
`));
    const bound = setTimeout(() => child.kill(), 10_000);
    t.after(() => clearTimeout(bound));
    assert.deepEqual(await exited, { code: 0, signal: null }, 'the process did not exit on its own within 10 s');
    const held = JSON.parse(out).filter((r) => /TCP|Timeout|Interval|FSReq/.test(r));
    assert.deepEqual(held, [], `after close() the process still held: ${out}`);
  });
});

describe('close: drain (transcript player)', () => {
  it('sends drain first, lets a running call finish with its signal alive, serves a call sent before the gateway heard, then closes with 1000', async (t) => {
    const { gw, agent } = await setup(t);
    const [release, open] = gate();
    const started = [];
    const signals = {};
    agent.register([
      defineTool({
        name: 'work', description: 'd', inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          started.push(call.callId);
          signals[call.callId] = call.signal;
          await release;
          return `done ${call.callId}`;
        },
      }),
      defineTool({ name: 'echo', description: 'd', inputSchema: { type: 'object' }, handler: (args) => args }),
    ]);
    let t0;
    let done = false;
    let closing;
    await gw.play(agent, [
      ...script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"work","args":{},"deadline":"+10s"}
-- do --
close
`),
      exactly({ type: 'drain' }), // the first message
      // A call the gateway sent before it heard the drain is still served.
      ...script(`
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"echo","args":{"n":2}}
`),
      exactly({ type: 'result', id: 'c-2', result: { content: [{ type: 'text', text: '{"n":2}' }] } }),
      ...script('-- do --\nwaiting\n'),
      exactly({ type: 'result', id: 'c-1', result: { content: [{ type: 'text', text: 'done c-1' }] } }),
      ...script('-- closed --\nthe agent is stopping\n'),
    ], {
      close: async () => {
        await waitFor(() => started.length === 1, { what: 'the handler to start' });
        t0 = Date.now();
        closing = agent.close().then(() => (done = true));
      },
      waiting: async () => {
        await sleep(300);
        assert.equal(done, false, 'close() waits for the running call');
        assert.equal(signals['c-1'].aborted, false, "the running call's signal is not aborted");
        assert.equal(agent.connected, true);
        open();
        await closing;
        assert.ok(Date.now() - t0 >= 300);
      },
    });
    assert.equal(signals['c-1'].aborted, false);
    assert.equal(agent.connected, false);
    assert.equal(gw.registrations.length, 1, 'no reconnect after close');
  });

  it('closes about 100 ms after the drain when no call is running', async (t) => {
    const { gw, agent } = await setup(t);
    await gw.play(agent, [
      ...script(connected + '\n-- do --\nclose\n'),
      exactly({ type: 'drain' }),
      ...script('-- closed --'),
    ], {
      close: async () => {
        await agent.connect();
        const t0 = Date.now();
        await agent.close();
        const took = Date.now() - t0;
        assert.ok(took >= 95 && took < 1000, `close took ${took} ms`);
      },
    });
  });

  it('aborts what still runs at drainTimeoutMs, sends nothing for it, and logs it', async (t) => {
    const { gw, agent, logger } = await setup(t, { drainTimeoutMs: 300 });
    let reason;
    let started = false;
    agent.register(
      defineTool({
        name: 'stuck', description: 'd', inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          started = true;
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reason = call.signal.reason;
          return 'late';
        },
      }),
    );
    await gw.play(agent, [
      ...script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"stuck","args":{}}
-- do --
close
`),
      exactly({ type: 'drain' }),
      ...script('-- closed --'),
    ], {
      close: async () => {
        await waitFor(() => started, { what: 'the handler to start' });
        const t0 = Date.now();
        await agent.close();
        const took = Date.now() - t0;
        assert.ok(took >= 290 && took < 1500, `close took ${took} ms`);
        assert.equal(reason?.message, 'The agent is closing.');
      },
    });
    assert.ok(
      logger.lines.some((l) => l.level === 'warn' && l.msg === 'spacefix: 1 call was still running 0.3 s after the drain; aborting it'),
      JSON.stringify(logger.lines),
    );
  });

  it('stops waiting when the gateway drops the connection during the drain', async (t) => {
    const { gw, agent } = await setup(t);
    let reason;
    let started = false;
    agent.register(
      defineTool({
        name: 'stuck', description: 'd', inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          started = true;
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reason = call.signal.reason;
        },
      }),
    );
    let t0;
    let closing;
    await gw.play(agent, script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"stuck","args":{}}
-- do --
close
-- agent --
{"type":"drain"}
-- drop --
-- do --
closed
`), {
      close: async () => {
        await waitFor(() => started, { what: 'the handler to start' });
        t0 = Date.now();
        closing = agent.close();
      },
      closed: async () => {
        await closing;
        assert.ok(Date.now() - t0 < 2000, `close took ${Date.now() - t0} ms`);
        assert.ok(reason, 'the call was aborted');
        assert.equal(gw.registrations.length, 1, 'no reconnect after close');
      },
    });
  });

  it('refuses a negative or non-numeric drainTimeoutMs', () => {
    for (const bad of [-1, Number.NaN, '10']) {
      assert.throws(() => new Agent({ apiKey: 'k', drainTimeoutMs: bad }), {
        name: 'TypeError',
        message: `new Agent: drainTimeoutMs must be a number of milliseconds, 0 or more; got ${String(bad)}`,
      });
    }
  });
});

describe('call.confirm (transcript player)', () => {
  /** setupAsk connects an agent whose tool `ask` runs f(call) and reports what it settled with. */
  async function setupAsk(t, f) {
    const { gw, agent } = await setup(t, { drainTimeoutMs: 0 });
    const outcomes = {};
    agent.register(
      defineTool({
        name: 'ask', description: 'd', inputSchema: { type: 'object' },
        handler: async (args, call) => {
          try {
            const v = await f(call, args);
            outcomes[call.callId] = { value: v };
            return v;
          } catch (err) {
            outcomes[call.callId] = { error: err };
            throw err;
          }
        },
      }),
    );
    const outcome = (id) => waitFor(() => outcomes[id], { what: `call ${id} to settle` });
    return { gw, agent, outcome };
  }
  const ask = (id) => `
-- gateway --
{"type":"call","id":"${id}","kind":"tool","name":"ask","args":{}}
`;

  it('sends confirm with the call id and a fresh input, and resolves with accepted', async (t) => {
    const { gw, agent, outcome } = await setupAsk(t, async (call) => [
      await call.confirm('Delete order 1042?'),
      await call.confirm('Really?'),
    ]);
    await gw.play(agent, [
      ...script(connected + ask('c-1')),
      exactly({ type: 'confirm', id: 'c-1', input: 'confirm-1', message: 'Delete order 1042?' }),
      ...script(`
-- gateway --
{"type":"confirmed","id":"c-1","input":"confirm-1","accepted":true}
`),
      exactly({ type: 'confirm', id: 'c-1', input: 'confirm-2', message: 'Really?' }),
      // An answer to another input, or to another call, is not this question's.
      ...script(`
-- gateway --
{"type":"confirmed","id":"c-1","input":"confirm-1","accepted":true}
-- gateway --
{"type":"confirmed","id":"c-9","input":"confirm-2","accepted":true}
-- gateway --
{"type":"confirmed","id":"c-1","input":"confirm-2","accepted":false}
-- do --
settled
`),
    ], { settled: async () => assert.deepEqual(await outcome('c-1'), { value: [true, false] }) });
  });

  it('rejects with CannotConfirmError when the gateway answers with a message', async (t) => {
    const { gw, agent, outcome } = await setupAsk(t, (call) => call.confirm('Delete order 1042?'));
    const why = 'the MCP client cannot ask the user: it does not support elicitation. Explain what you are about to do and ask the user in the conversation instead.';
    await gw.play(agent, [
      ...script(connected + ask('c-1') + `
-- agent --
{"type":"confirm","id":"c-1"}
-- gateway --
${JSON.stringify({ type: 'confirmed', id: 'c-1', input: 'confirm-1', message: why })}
-- do --
settled
`),
      // The handler let it propagate: the client reads the gateway's words.
      exactly({ type: 'error', id: 'c-1', message: why }),
    ], {
      settled: async () => {
        const { error } = await outcome('c-1');
        assert.ok(error instanceof CannotConfirmError);
        assert.ok(isCannotConfirm(error));
        assert.equal(error.name, 'CannotConfirmError');
        assert.equal(error.message, why);
        assert.equal(error.reason, 'it does not support elicitation. Explain what you are about to do and ask the user in the conversation instead.');
      },
    });
    // Another reason is worded the same way.
    assert.equal(new CannotConfirmError('another question of this call is still waiting for the user').message,
      'the MCP client cannot ask the user: another question of this call is still waiting for the user');
    assert.equal(isCannotConfirm(new Error('the MCP client cannot ask the user')), false);
  });

  it('rejects with the signal reason when the call is cancelled while it waits', async (t) => {
    const { gw, agent, outcome } = await setupAsk(t, (call) => call.confirm('Delete?'));
    // A late answer changes nothing, and nothing is sent for the aborted
    // call: the next message is c-2's question.
    await gw.play(agent, script(connected + ask('c-1') + `
-- agent --
{"type":"confirm","id":"c-1"}
-- gateway --
{"type":"cancel","id":"c-1","reason":"timeout"}
-- do --
settled
-- gateway --
{"type":"confirmed","id":"c-1","input":"confirm-1","accepted":true}
` + ask('c-2') + `
-- agent --
{"type":"confirm","id":"c-2"}
`), {
      settled: async () => {
        const { error } = await outcome('c-1');
        assert.equal(error.name, 'TimeoutError');
        assert.equal(error.message, "The call's wait expired: the gateway has given up on it.");
      },
    });
  });

  it('asks one question at a time', async (t) => {
    const { gw, agent, outcome } = await setupAsk(t, async (call) => {
      const first = call.confirm('One?');
      const second = await call.confirm('Two?').then(() => 'answered', (err) => err.message);
      return [await first, second];
    });
    // One question, then the result: no second question was sent.
    await gw.play(agent, script(connected + ask('c-1') + `
-- agent --
{"type":"confirm","id":"c-1","input":"confirm-1"}
-- gateway --
{"type":"confirmed","id":"c-1","input":"confirm-1","accepted":true}
-- do --
settled
-- agent --
{"type":"result","id":"c-1"}
`), {
      settled: async () =>
        assert.deepEqual(await outcome('c-1'), {
          value: [true, 'call.confirm: another question of this call is still waiting for the user; ask one at a time'],
        }),
    });
  });

  it('rejects a question left waiting when the handler returns, and one asked after', async (t) => {
    let kept;
    let late;
    const { gw, agent, outcome } = await setupAsk(t, (call) => {
      kept = call;
      late = call.confirm('Left behind?');
      late.catch(() => {});
      return 'returned';
    });
    await gw.play(agent, script(connected + ask('c-1') + `
-- agent --
{"type":"confirm","id":"c-1"}
-- agent --
{"type":"result","id":"c-1"}
-- do --
settled
`), {
      settled: async () => {
        assert.deepEqual(await outcome('c-1'), { value: 'returned' });
        await assert.rejects(late, { message: 'call.confirm: the call is over: its handler has returned' });
        await assert.rejects(kept.confirm('After?'), { message: 'call.confirm: the call is over: its handler has returned' });
      },
    });
  });
});
