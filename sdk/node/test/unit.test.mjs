// Unit tests: what the SDK does on its own. On the wire against the
// transcript player: wire.test.mjs; through the real gateway:
// gateway.test.mjs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type } from 'arktype';
import { z } from 'zod';

import { Agent, checkName, definePrompt, defineResource, defineTool, toJSONSchema, toolError, toolImage, toolText } from '../dist/index.js';
import { gatewayURLs } from '../dist/registration.js';
import { ProgressThrottle } from '../dist/progress.js';
import { memoryLogger } from './harness.mjs';

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

describe('idempotencyKey', () => {
  const handler = () => 'ok';
  const create = (idempotencyKey, inputSchema) => () => defineTool({ name: 'create_order', description: 'd', inputSchema, idempotencyKey, handler });
  const why = (end) => ({ name: 'TypeError', message: `Tool "create_order" names "requestId" as its idempotency key, but ${end}; make it a required string argument.` });

  it('is kept on a tool whose schema has it as a required string', () => {
    assert.equal(create('requestId', z.object({ requestId: z.string(), total: z.number() }))().idempotencyKey, 'requestId');
    const plain = { type: 'object', properties: { requestId: { type: 'string' } }, required: ['requestId'] };
    assert.equal(create('requestId', plain)().idempotencyKey, 'requestId');
    assert.equal('idempotencyKey' in defineTool({ name: 'get_order', description: 'd', inputSchema: { type: 'object' }, handler }), false);
  });

  it('is refused with the gateway\'s words when the schema does not have it as a required string', () => {
    assert.throws(create('requestId', z.object({ request_id: z.string() })), why('the input schema has no such argument'));
    assert.throws(create('requestId', { type: 'object' }), why('the input schema has no such argument'));
    assert.throws(create('requestId', z.object({ requestId: z.number() })), why('it is not a string'));
    assert.throws(create('requestId', z.object({ requestId: z.string().optional() })), why('it is not required'));
    assert.throws(create('requestId', { type: 'object', properties: { requestId: { type: 'string' } } }), why('it is not required'));
  });

  it('must be a name', () => {
    assert.throws(create('', z.object({ requestId: z.string() })), {
      message: 'defineTool "create_order": idempotencyKey must name the tool\'s request id argument, for example \'requestId\'',
    });
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
