// Unit tests: what the SDK does on its own, and on the wire against a
// scripted peer. Behaviour through the real gateway is in gateway.test.mjs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type } from 'arktype';
import { z } from 'zod';

import { Agent, CannotConfirmError, checkName, definePrompt, defineResource, defineTool, isCannotConfirm, toJSONSchema, toolError, toolImage, toolText } from '../dist/index.js';
import { backoffDelay, gatewayURLs } from '../dist/registration.js';
import { ProgressThrottle } from '../dist/progress.js';
import { fakeGateway } from './fakegateway.mjs';
import { memoryLogger, waitFor } from './harness.mjs';

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

describe('backoff', () => {
  it('starts at 250 ms, doubles to 30 s, with ±20 % jitter', () => {
    assert.equal(backoffDelay(0, () => 0.5), 250);
    assert.equal(backoffDelay(0, () => 0), 200);
    assert.equal(backoffDelay(0, () => 1), 300);
    assert.equal(backoffDelay(1, () => 0.5), 500);
    assert.equal(backoffDelay(3, () => 0.5), 2000);
    assert.equal(backoffDelay(7, () => 0.5), 30000);
    assert.equal(backoffDelay(50, () => 0.5), 30000);
    assert.equal(backoffDelay(50, () => 0), 24000);
    assert.equal(backoffDelay(50, () => 1), 36000);
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
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const saved = [process.env.SPACEFIX_API_KEY, process.env.SPACEFIX_URL];
    process.env.SPACEFIX_API_KEY = 'sfx_agent_from_env';
    process.env.SPACEFIX_URL = gw.url;
    t.after(() => {
      [process.env.SPACEFIX_API_KEY, process.env.SPACEFIX_URL] = saved;
      if (saved[0] === undefined) delete process.env.SPACEFIX_API_KEY;
      if (saved[1] === undefined) delete process.env.SPACEFIX_URL;
    });
    const agent = new Agent({ logger: memoryLogger() });
    await agent.connect();
    await agent.close();
    assert.equal(gw.registrations[0].auth, 'Bearer sfx_agent_from_env');
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

  it('passes raw JSON Schema 2020-12 through unchanged, $schema, $defs, $anchor and if/then/else included', () => {
    const raw = {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { cur: { $anchor: 'cur', enum: ['EUR', 'USD'] } },
      properties: { kind: { enum: ['card', 'transfer'] }, currency: { $ref: '#cur' }, iban: { type: 'string' } },
      allOf: [{ if: { properties: { kind: { const: 'transfer' } } }, then: { required: ['iban'] } }],
    };
    const tool = defineTool({ name: 'pay', description: 'd', inputSchema: raw, outputSchema: { type: 'object', $defs: {} }, handler: () => 1 });
    assert.deepEqual(tool.inputSchema, raw);
    assert.equal(JSON.stringify(tool.inputSchema), JSON.stringify(raw));
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

describe('wire behaviour (scripted gateway)', () => {
  it('sends the registration of the protocol, with the options and replacing same names', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const agent = new Agent({
      apiKey: 'sfx_agent_k', url: gw.url, logger: memoryLogger(),
      name: 'orders', displayName: 'Orders', author: 'Ada', namespace: true, instance: 'eu-1', version: '1.4.2',
    });
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
    await agent.connect();
    await agent.close();
    assert.equal(gw.registrations[0].auth, 'Bearer sfx_agent_k');
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
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    await agent.connect();
    t.after(() => agent.close());
    assert.throws(() => agent.register([]), { message: 'agent.register: the agent is already connected; register everything before connect()' });
  });

  it('closes a connection whose pongs stop and connects again', async (t) => {
    const gw = await fakeGateway({ autoPong: false, heartbeatMs: 100 });
    t.after(() => gw.close());
    const logger = memoryLogger();
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger });
    await agent.connect();
    t.after(() => agent.close());
    await waitFor(() => gw.registrations.length >= 2, { what: 'a second registration' });
    assert.ok(
      logger.lines.some((l) => l.level === 'warn' && /^spacefix: lost the connection to the gateway \(reconnecting in 0\.[23] s\): no pong from the gateway within 100 ms$/.test(l.msg)),
      JSON.stringify(logger.lines),
    );
  });

  it('answers pings and stays connected while pongs come', async (t) => {
    const gw = await fakeGateway({ heartbeatMs: 50 });
    t.after(() => gw.close());
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    await agent.connect();
    t.after(() => agent.close());
    let pongs = 0;
    gw.ws.on('pong', () => pongs++);
    let pings = 0;
    gw.ws.on('ping', () => pings++);
    for (let i = 0; i < 5; i++) gw.ws.ping();
    await waitFor(() => pongs === 5 && pings >= 5, { what: 'five pongs and five pings' });
    assert.equal(gw.registrations.length, 1);
    assert.equal(agent.connected, true);
  });

  it('aborts at the deadline and does not send the late result', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    let reason;
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
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
    await agent.connect();
    t.after(() => agent.close());
    gw.send({ type: 'call', id: 'c-1', kind: 'tool', name: 'slow', args: {}, deadline: Date.now() + 100 });
    await waitFor(() => reason, { what: 'the deadline to abort the signal' });
    assert.equal(reason.name, 'TimeoutError');
    assert.equal(reason.message, "The call's deadline passed: the gateway has given up on it.");
    // Messages on one socket arrive in order: once echo's result is here, a
    // result for c-1 would have come first.
    gw.send({ type: 'call', id: 'c-2', kind: 'tool', name: 'echo', args: { a: 1 }, deadline: Date.now() + 5000 });
    await gw.waitMessage((m) => m.id === 'c-2');
    assert.deepEqual(gw.messages, [{ type: 'result', id: 'c-2', result: { content: [{ type: 'text', text: '{"a":1}' }] } }]);
  });

  it('gives the handler the trace context of the call message, and none that is malformed', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const seen = {};
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    agent.register([
      defineTool({
        name: 'trace', description: 'd', inputSchema: { type: 'object' },
        handler: (_args, call) => {
          seen[call.callId] = { traceparent: call.traceparent, tracestate: call.tracestate };
          return 'ok';
        },
      }),
    ]);
    await agent.connect();
    t.after(() => agent.close());
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    gw.send({ type: 'call', id: 'c-1', kind: 'tool', name: 'trace', args: {}, traceparent: tp, tracestate: 'sfx=1' });
    gw.send({ type: 'call', id: 'c-2', kind: 'tool', name: 'trace', args: {} });
    gw.send({ type: 'call', id: 'c-3', kind: 'tool', name: 'trace', args: {}, traceparent: 'not-a-traceparent', tracestate: 'sfx=1' });
    await gw.waitMessage((m) => m.id === 'c-3' && m.type === 'result');
    assert.deepEqual(seen, {
      'c-1': { traceparent: tp, tracestate: 'sfx=1' },
      'c-2': { traceparent: '', tracestate: '' },
      'c-3': { traceparent: '', tracestate: '' },
    });
  });

  it('aborts on cancel, and on disconnect, and sends nothing for either', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const reasons = {};
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    agent.register([
      defineTool({
        name: 'wait', description: 'd', inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reasons[call.callId] = call.signal.reason.message;
          return 'late';
        },
      }),
      defineTool({ name: 'echo', description: 'd', inputSchema: { type: 'object' }, handler: (args) => args }),
    ]);
    await agent.connect();
    t.after(() => agent.close());
    gw.send({ type: 'call', id: 'c-1', kind: 'tool', name: 'wait', args: {} });
    gw.send({ type: 'call', id: 'c-2', kind: 'tool', name: 'wait', args: {} });
    gw.send({ type: 'cancel', id: 'c-1', reason: 'cancelled' });
    gw.send({ type: 'cancel', id: 'c-2', reason: 'timeout' });
    await waitFor(() => reasons['c-1'] && reasons['c-2'], { what: 'both signals to abort' });
    assert.equal(reasons['c-1'], 'The client cancelled the call.');
    assert.equal(reasons['c-2'], "The call's wait expired: the gateway has given up on it.");
    gw.send({ type: 'call', id: 'c-3', kind: 'tool', name: 'echo', args: {} });
    await gw.waitMessage((m) => m.id === 'c-3');
    assert.deepEqual(gw.messages.map((m) => m.id), ['c-3']);

    gw.send({ type: 'call', id: 'c-4', kind: 'tool', name: 'wait', args: {} });
    await waitFor(() => agent.connected && gw.sockets.length === 1);
    gw.ws.terminate();
    await waitFor(() => reasons['c-4'], { what: 'the disconnect to abort the signal' });
    assert.equal(reasons['c-4'], 'The connection to the gateway ended.');
  });

  it('answers a call for something it does not offer with an error', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    await agent.connect();
    t.after(() => agent.close());
    gw.send({ type: 'call', id: 'c-9', kind: 'tool', name: 'nope', args: {} });
    assert.deepEqual(await gw.waitMessage((m) => m.id === 'c-9'), { type: 'error', id: 'c-9', message: 'This agent has no tool "nope".' });
  });

  it('registers a tool switched off before connect, and sends set_enabled while connected', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    agent.register([defineTool({ name: 'run_tests', description: 'd', inputSchema: { type: 'object' }, handler: () => 1 })]);
    await agent.setEnabled('run_tests', false);
    await agent.connect();
    t.after(() => agent.close());
    assert.equal(gw.registrations[0].body.tools[0].disabled, true);
    await agent.setEnabled('run_tests', true);
    assert.deepEqual(await gw.waitMessage((m) => m.type === 'set_enabled'), { type: 'set_enabled', name: 'run_tests', enabled: true });
    await assert.rejects(agent.setEnabled('nope', true), { message: 'agent.setEnabled: no tool named "nope" is registered' });
  });

  it('sends set_enabled for its own replica even when the setting did not change', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    agent.register([defineTool({ name: 'run_tests', description: 'd', inputSchema: { type: 'object' }, handler: () => 1 })]);
    await agent.connect();
    t.after(() => agent.close());
    await agent.setEnabled('run_tests', true); // already on
    await agent.setEnabled('run_tests', false);
    await agent.setEnabled('run_tests', false); // already off
    await waitFor(() => gw.messages.filter((m) => m.type === 'set_enabled').length === 3 || undefined, { ms: 5000, what: 'three set_enabled' });
    assert.deepEqual(
      gw.messages.filter((m) => m.type === 'set_enabled').map((m) => m.enabled),
      [true, false, false],
    );
  });

  it('logs a refused registration with the gateway text and retries with backoff', async (t) => {
    const gw = await fakeGateway({ refuse: 'Invalid tool name "get order".' });
    t.after(() => gw.close());
    const logger = memoryLogger();
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger });
    const connected = agent.connect();
    await waitFor(() => gw.registrations.length >= 3, { what: 'three attempts' });
    await agent.close();
    await connected; // resolves on close; never rejects
    const refusals = logger.lines.filter((l) => l.level === 'error');
    assert.ok(refusals.length >= 2, JSON.stringify(logger.lines));
    assert.match(
      refusals[0].msg,
      /^spacefix: the gateway refused the agent \(retrying in 0\.[23] s, attempt 1\): register: 400 Bad Request: Invalid tool name "get order"\.$/,
    );
    assert.match(refusals[1].msg, /^spacefix: the gateway refused the agent \(retrying in 0\.[4-6] s, attempt 2\): register: 400 /);
  });
});

/** closed resolves with the close code the scripted gateway's latest socket gets. */
function closedWith(gw) {
  return new Promise((resolve) => gw.ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
}

/** gate returns a promise and the function that resolves it. */
function gate() {
  let open;
  const p = new Promise((r) => (open = r));
  return [p, open];
}

describe('close: drain (scripted gateway)', () => {
  it('sends drain first, lets a running call finish with its signal alive, serves a call sent before the gateway heard, then closes with 1000', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const [release, open] = gate();
    const started = [];
    const signals = {};
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
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
    await agent.connect();
    t.after(() => agent.close());
    const closed = closedWith(gw);
    gw.send({ type: 'call', id: 'c-1', kind: 'tool', name: 'work', args: {}, deadline: Date.now() + 10_000 });
    await waitFor(() => started.length === 1, { what: 'the handler to start' });

    const t0 = Date.now();
    let done = false;
    const closing = agent.close().then(() => (done = true));
    await gw.waitMessage((m) => m.type === 'drain', 'the drain');
    assert.deepEqual(gw.messages, [{ type: 'drain' }], 'drain is the first message');
    // A call the gateway sent before it heard the drain is still served.
    gw.send({ type: 'call', id: 'c-2', kind: 'tool', name: 'echo', args: { n: 2 } });
    await gw.waitMessage((m) => m.id === 'c-2', 'the result of c-2');

    await new Promise((r) => setTimeout(r, 300));
    assert.equal(done, false, 'close() waits for the running call');
    assert.equal(signals['c-1'].aborted, false, "the running call's signal is not aborted");
    assert.equal(agent.connected, true);
    open();
    await closing;
    assert.ok(Date.now() - t0 >= 300);
    assert.deepEqual(gw.messages, [
      { type: 'drain' },
      { type: 'result', id: 'c-2', result: { content: [{ type: 'text', text: '{"n":2}' }] } },
      { type: 'result', id: 'c-1', result: { content: [{ type: 'text', text: 'done c-1' }] } },
    ]);
    assert.equal(signals['c-1'].aborted, false);
    assert.deepEqual(await closed, { code: 1000, reason: 'the agent is stopping' });
    assert.equal(agent.connected, false);
    assert.equal(gw.registrations.length, 1, 'no reconnect after close');
  });

  it('closes about 100 ms after the drain when no call is running', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    await agent.connect();
    const closed = closedWith(gw);
    const t0 = Date.now();
    await agent.close();
    const took = Date.now() - t0;
    assert.ok(took >= 95 && took < 1000, `close took ${took} ms`);
    assert.deepEqual(gw.messages, [{ type: 'drain' }]);
    assert.equal((await closed).code, 1000);
  });

  it('aborts what still runs at drainTimeoutMs, sends nothing for it, and logs it', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const logger = memoryLogger();
    let reason;
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger, drainTimeoutMs: 300 });
    agent.register(
      defineTool({
        name: 'stuck', description: 'd', inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reason = call.signal.reason;
          return 'late';
        },
      }),
    );
    await agent.connect();
    const closed = closedWith(gw);
    gw.send({ type: 'call', id: 'c-1', kind: 'tool', name: 'stuck', args: {} });
    await waitFor(() => agent.connected);
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    await agent.close();
    const took = Date.now() - t0;
    assert.ok(took >= 290 && took < 1500, `close took ${took} ms`);
    assert.equal(reason?.message, 'The agent is closing.');
    assert.equal((await closed).code, 1000);
    assert.deepEqual(gw.messages, [{ type: 'drain' }]);
    assert.ok(
      logger.lines.some((l) => l.level === 'warn' && l.msg === 'spacefix: 1 call was still running 0.3 s after the drain; aborting it'),
      JSON.stringify(logger.lines),
    );
  });

  it('stops waiting when the gateway drops the connection during the drain', async (t) => {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    let reason;
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger() });
    agent.register(
      defineTool({
        name: 'stuck', description: 'd', inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reason = call.signal.reason;
        },
      }),
    );
    await agent.connect();
    gw.send({ type: 'call', id: 'c-1', kind: 'tool', name: 'stuck', args: {} });
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    const closing = agent.close();
    await gw.waitMessage((m) => m.type === 'drain');
    gw.ws.terminate();
    await closing;
    assert.ok(Date.now() - t0 < 2000, `close took ${Date.now() - t0} ms`);
    assert.ok(reason, 'the call was aborted');
    assert.equal(gw.registrations.length, 1, 'no reconnect after close');
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

describe('call.confirm (scripted gateway)', () => {
  /** setup connects an agent whose tool `ask` runs script(call) and reports what it settled with. */
  async function setup(t, script) {
    const gw = await fakeGateway();
    t.after(() => gw.close());
    const outcomes = {};
    const calls = {};
    const agent = new Agent({ apiKey: 'k', url: gw.url, logger: memoryLogger(), drainTimeoutMs: 0 });
    agent.register(
      defineTool({
        name: 'ask', description: 'd', inputSchema: { type: 'object' },
        handler: async (args, call) => {
          calls[call.callId] = call;
          try {
            const v = await script(call, args);
            outcomes[call.callId] = { value: v };
            return v;
          } catch (err) {
            outcomes[call.callId] = { error: err };
            throw err;
          }
        },
      }),
    );
    await agent.connect();
    t.after(() => agent.close());
    const run = (id, args = {}) => gw.send({ type: 'call', id, kind: 'tool', name: 'ask', args });
    const outcome = (id) => waitFor(() => outcomes[id], { what: `call ${id} to settle` });
    return { gw, run, outcome, calls };
  }

  it('sends confirm with the call id and a fresh input, and resolves with accepted', async (t) => {
    const { gw, run, outcome } = await setup(t, async (call) => [
      await call.confirm('Delete order 1042?'),
      await call.confirm('Really?'),
    ]);
    run('c-1');
    const q1 = await gw.waitMessage((m) => m.type === 'confirm');
    assert.deepEqual(q1, { type: 'confirm', id: 'c-1', input: 'confirm-1', message: 'Delete order 1042?' });
    gw.send({ type: 'confirmed', id: 'c-1', input: 'confirm-1', accepted: true });
    const q2 = await gw.waitMessage((m) => m.type === 'confirm' && m.input === 'confirm-2');
    assert.deepEqual(q2, { type: 'confirm', id: 'c-1', input: 'confirm-2', message: 'Really?' });
    // An answer to another input, or to another call, is not this question's.
    gw.send({ type: 'confirmed', id: 'c-1', input: 'confirm-1', accepted: true });
    gw.send({ type: 'confirmed', id: 'c-9', input: 'confirm-2', accepted: true });
    gw.send({ type: 'confirmed', id: 'c-1', input: 'confirm-2', accepted: false });
    assert.deepEqual(await outcome('c-1'), { value: [true, false] });
  });

  it('rejects with CannotConfirmError when the gateway answers with a message', async (t) => {
    const { gw, run, outcome } = await setup(t, (call) => call.confirm('Delete order 1042?'));
    run('c-1');
    await gw.waitMessage((m) => m.type === 'confirm');
    const why = 'the MCP client cannot ask the user: it does not support elicitation. Explain what you are about to do and ask the user in the conversation instead.';
    gw.send({ type: 'confirmed', id: 'c-1', input: 'confirm-1', message: why });
    const { error } = await outcome('c-1');
    assert.ok(error instanceof CannotConfirmError);
    assert.ok(isCannotConfirm(error));
    assert.equal(error.name, 'CannotConfirmError');
    assert.equal(error.message, why);
    assert.equal(error.reason, 'it does not support elicitation. Explain what you are about to do and ask the user in the conversation instead.');
    // The handler let it propagate: the client reads the gateway's words.
    assert.deepEqual(await gw.waitMessage((m) => m.type === 'error'), { type: 'error', id: 'c-1', message: why });
    // Another reason is worded the same way.
    assert.equal(new CannotConfirmError('another question of this call is still waiting for the user').message,
      'the MCP client cannot ask the user: another question of this call is still waiting for the user');
    assert.equal(isCannotConfirm(new Error('the MCP client cannot ask the user')), false);
  });

  it('rejects with the signal reason when the call is cancelled while it waits', async (t) => {
    const { gw, run, outcome } = await setup(t, (call) => call.confirm('Delete?'));
    run('c-1');
    await gw.waitMessage((m) => m.type === 'confirm');
    gw.send({ type: 'cancel', id: 'c-1', reason: 'timeout' });
    const { error } = await outcome('c-1');
    assert.equal(error.name, 'TimeoutError');
    assert.equal(error.message, "The call's wait expired: the gateway has given up on it.");
    // A late answer changes nothing, and nothing is sent for the aborted call.
    gw.send({ type: 'confirmed', id: 'c-1', input: 'confirm-1', accepted: true });
    run('c-2');
    await gw.waitMessage((m) => m.id === 'c-2' && m.type === 'confirm');
    assert.deepEqual(gw.messages.map((m) => `${m.type} ${m.id}`), ['confirm c-1', 'confirm c-2']);
  });

  it('asks one question at a time', async (t) => {
    const { gw, run, outcome } = await setup(t, async (call) => {
      const first = call.confirm('One?');
      const second = await call.confirm('Two?').then(() => 'answered', (err) => err.message);
      return [await first, second];
    });
    run('c-1');
    await gw.waitMessage((m) => m.type === 'confirm');
    gw.send({ type: 'confirmed', id: 'c-1', input: 'confirm-1', accepted: true });
    assert.deepEqual(await outcome('c-1'), {
      value: [true, 'call.confirm: another question of this call is still waiting for the user; ask one at a time'],
    });
    assert.equal(gw.messages.filter((m) => m.type === 'confirm').length, 1);
  });

  it('rejects a question left waiting when the handler returns, and one asked after', async (t) => {
    let kept;
    let late;
    const { gw, run, outcome } = await setup(t, (call) => {
      kept = call;
      late = call.confirm('Left behind?');
      late.catch(() => {});
      return 'returned';
    });
    run('c-1');
    assert.deepEqual(await outcome('c-1'), { value: 'returned' });
    await assert.rejects(late, { message: 'call.confirm: the call is over: its handler has returned' });
    await assert.rejects(kept.confirm('After?'), { message: 'call.confirm: the call is over: its handler has returned' });
    await gw.waitMessage((m) => m.type === 'result');
  });
});
