// End-to-end: a real gateway built from this repository, real agents using
// this SDK, and the official MCP TypeScript client.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';

import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { type } from 'arktype';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { z } from 'zod';

import { Agent, CannotConfirmError, MissingCapabilityError, ProtocolError, definePrompt, defineResource, defineResourceTemplate, defineTool, toolError, toolImage, toolText } from '../dist/index.js';
import { Gateway, memoryLogger, startAgent, textOf, toolNames, untilVisible, waitFor } from './harness.mjs';

const DOT_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

let gw;
let client;
const agents = [];

before(async () => {
  gw = await Gateway.start();
  client = await gw.client();
});

after(async () => {
  await client?.close();
  await Promise.all(agents.map((a) => a.close()));
  await gw?.dispose();
});

/** connect starts an agent, closes it after the file, and waits until the client sees what it offers. */
async function connect(items, options) {
  const a = await startAgent(gw, items, options);
  agents.push(a.agent);
  await untilVisible(client, items, options);
  return a;
}

/** untilTool waits until the client's tool list has (or, with present false, lacks) name. */
function untilTool(name, present = true) {
  return waitFor(async () => (await toolNames(client)).includes(name) === present, {
    what: `tool ${name} to be ${present ? 'listed' : 'gone'}`,
  });
}

const obj = { type: 'object' };

describe('tools/list', () => {
  it('shows names, titles, descriptions, schemas and annotations as defined', async () => {
    const searchSchema = z.object({
      customer: z.string().describe('Customer handle, for example "ada"'),
      status: z.enum(['open', 'shipped', 'cancelled']).optional().describe('Only orders in this status'),
      limit: z.number().int().min(1).max(50).default(10).describe('How many orders to return (1 to 50)'),
    });
    await connect([
      defineTool({
        name: 'list_lookup',
        title: 'Look up an order',
        description: 'Look up one order by its id.',
        inputSchema: { type: 'object', properties: { id: { type: 'string', description: 'The order id' } }, required: ['id'] },
        annotations: { title: 'Lookup', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
        handler: () => 'x',
      }),
      defineTool({ name: 'list_search', description: 'List orders for a customer.', inputSchema: searchSchema, handler: () => [] }),
    ]);
    const { tools } = await client.listTools();
    const lookup = tools.find((t) => t.name === 'list_lookup');
    const search = tools.find((t) => t.name === 'list_search');
    assert.deepEqual(lookup, {
      name: 'list_lookup',
      title: 'Look up an order',
      description: 'Look up one order by its id.',
      inputSchema: { type: 'object', properties: { id: { type: 'string', description: 'The order id' } }, required: ['id'] },
      annotations: { title: 'Lookup', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    });
    const { $schema, ...want } = z.toJSONSchema(searchSchema, { io: 'input' });
    assert.deepEqual(search, { name: 'list_search', description: 'List orders for a customer.', inputSchema: want });
    assert.deepEqual(search.inputSchema.required, ['customer']);
  });
});

describe('results', () => {
  const big = 'x'.repeat(4 * 1024 * 1024);
  const cycle = { name: 'loop' };
  cycle.self = cycle;
  const tools = {
    res_string: () => 'hello',
    res_undefined: () => undefined,
    res_null: async () => null,
    res_object: async () => ({ id: '1042', items: ['mouse', 'pad'], total: 2599, open: true }),
    res_number: () => 42,
    res_content: () => ({ content: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }] }),
    res_content_error: () => ({ content: [{ type: 'text', text: 'Shaped failure.' }], isError: true }),
    res_text: () => toolText('plain text'),
    res_image: () => toolImage(DOT_PNG, 'image/png', 'a red dot'),
    res_tool_error: () => toolError('The warehouse is closed. Try again after 8:00.'),
    res_throw: () => {
      throw new Error('No order with id 7. Ask the user to confirm the id, or use search_orders.');
    },
    res_reject: async () => {
      throw new RangeError('limit too high for this customer');
    },
    res_bigint: () => ({ n: 10n }),
    res_cycle: () => cycle,
    res_too_large: () => big,
    res_seventeen: () => ({ content: Array.from({ length: 17 }, (_, i) => ({ type: 'text', text: String(i) })) }),
  };
  let logs;

  before(async () => {
    ({ logs } = await connect(
      Object.entries(tools).map(([name, handler]) => defineTool({ name, description: name, inputSchema: obj, handler })),
    ));
  });

  const call = (name) => client.callTool({ name, arguments: {} });

  it('sends a string as text, undefined and null as null, other values as JSON text', async () => {
    assert.deepEqual(await call('res_string'), { content: [{ type: 'text', text: 'hello' }] });
    assert.deepEqual(await call('res_undefined'), { content: [{ type: 'text', text: 'null' }] });
    assert.deepEqual(await call('res_null'), { content: [{ type: 'text', text: 'null' }] });
    assert.deepEqual(await call('res_object'), {
      content: [{ type: 'text', text: '{"id":"1042","items":["mouse","pad"],"total":2599,"open":true}' }],
    });
    assert.deepEqual(await call('res_number'), { content: [{ type: 'text', text: '42' }] });
  });

  it('passes a value with a content array through, with isError', async () => {
    assert.deepEqual(await call('res_content'), { content: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }] });
    assert.deepEqual(await call('res_content_error'), { content: [{ type: 'text', text: 'Shaped failure.' }], isError: true });
  });

  it('builds results with toolText, toolImage and toolError', async () => {
    assert.deepEqual(await call('res_text'), { content: [{ type: 'text', text: 'plain text' }] });
    assert.deepEqual(await call('res_image'), {
      content: [
        { type: 'image', data: DOT_PNG, mimeType: 'image/png' },
        { type: 'text', text: 'a red dot' },
      ],
    });
    assert.deepEqual(await call('res_tool_error'), {
      content: [{ type: 'text', text: 'The warehouse is closed. Try again after 8:00.' }],
      isError: true,
    });
  });

  it('sends a thrown error as isError with the message only, and logs it', async () => {
    assert.deepEqual(await call('res_throw'), {
      content: [{ type: 'text', text: 'No order with id 7. Ask the user to confirm the id, or use search_orders.' }],
      isError: true,
    });
    assert.deepEqual(await call('res_reject'), { content: [{ type: 'text', text: 'limit too high for this customer' }], isError: true });
    assert.ok(
      logs.some((l) => l.level === 'warn' && l.msg === 'spacefix: tool "res_throw" failed: No order with id 7. Ask the user to confirm the id, or use search_orders.'),
    );
  });

  it('fails a result that cannot be serialised', async () => {
    assert.deepEqual(await call('res_bigint'), {
      content: [{ type: 'text', text: 'Result could not be serialised: Do not know how to serialize a BigInt' }],
      isError: true,
    });
    const r = await call('res_cycle');
    assert.equal(r.isError, true);
    assert.equal(
      textOf(r),
      "Result could not be serialised: Converting circular structure to JSON --> starting at object with constructor 'Object' --- property 'self' closes the circle",
    );
  });

  it('fails a result over 4 MiB, and one with 17 parts', async () => {
    const n = Buffer.byteLength(JSON.stringify({ content: [{ type: 'text', text: big }] }));
    assert.deepEqual(await call('res_too_large'), {
      content: [{ type: 'text', text: `Result is too large: ${n.toLocaleString('en-US')} bytes; the limit is 4 MiB (4,194,304 bytes). Return less, or page through it.` }],
      isError: true,
    });
    assert.deepEqual(await call('res_seventeen'), {
      content: [{ type: 'text', text: 'Result has 17 content parts; a tool result carries 1 to 16.' }],
      isError: true,
    });
  });
});

describe('schemas and validation', () => {
  const seen = {};
  before(async () => {
    await connect([
      defineTool({
        name: 'search_orders',
        description: 'List orders for a customer, newest first.',
        inputSchema: z.object({
          customer: z.string(),
          status: z.enum(['open', 'shipped', 'cancelled']).optional(),
          limit: z.number().int().min(1).max(50).default(10),
          code: z.string().regex(/^[0-9]+$/).optional(),
          note: z.string().refine((s) => s !== 'forbidden').optional(),
          size: z.string().transform((s) => s.length).optional(),
        }),
        handler: (args) => {
          seen.search = args;
          return 'ok';
        },
      }),
      defineTool({
        name: 'get_order',
        description: 'Look up one order.',
        inputSchema: z.object({ id: z.string() }),
        handler: ({ id }) => id,
      }),
      defineTool({
        name: 'plain_schema',
        description: 'Plain JSON Schema.',
        inputSchema: { type: 'object', properties: { n: { type: 'integer', minimum: 1 } }, required: ['n'], additionalProperties: false },
        handler: (args) => {
          seen.plain = args;
          return args.n * 2;
        },
      }),
      defineTool({
        name: 'ark_tool',
        description: 'ArkType through Standard Schema.',
        inputSchema: type({ id: 'string', 'count?': '1<=number<=5' }),
        handler: (args) => {
          seen.ark = args;
          return `${args.id}:${args.count ?? 'none'}`;
        },
      }),
    ]);
  });

  it('is validated by the gateway with its exact messages', async () => {
    const bad = async (name, args) => {
      const r = await client.callTool({ name, arguments: args });
      assert.equal(r.isError, true);
      return textOf(r);
    };
    assert.equal(
      await bad('search_orders', { customer: 'ada', limit: 51 }),
      'Input validation error: Invalid arguments for tool search_orders: data/limit must be <= 50',
    );
    assert.equal(
      await bad('search_orders', { customer: 'ada', status: 'lost' }),
      'Input validation error: Invalid arguments for tool search_orders: data/status must be equal to one of the allowed values',
    );
    assert.equal(await bad('get_order', {}), "Input validation error: Invalid arguments for tool get_order: data must have required property 'id'");
    assert.equal(
      await bad('search_orders', { customer: 'ada', code: '12a' }),
      'Input validation error: Invalid arguments for tool search_orders: data/code must match pattern "^[0-9]+$"',
    );
    assert.equal(await bad('plain_schema', { n: 0 }), 'Input validation error: Invalid arguments for tool plain_schema: data/n must be >= 1');
    assert.equal(
      await bad('plain_schema', { n: 1, extra: true }),
      'Input validation error: Invalid arguments for tool plain_schema: data must NOT have additional properties',
    );
    assert.equal(await bad('ark_tool', { id: 'a', count: 9 }), 'Input validation error: Invalid arguments for tool ark_tool: data/count must be <= 5');
    assert.equal(seen.search, undefined, 'no invalid call reached the handler');
  });

  it('hands the arguments over as sent: no defaults, refinements or transforms', async () => {
    const r = await client.callTool({ name: 'search_orders', arguments: { customer: 'ada', note: 'forbidden', size: 'large' } });
    assert.equal(textOf(r), 'ok');
    assert.deepEqual(seen.search, { customer: 'ada', note: 'forbidden', size: 'large' });
    assert.equal(textOf(await client.callTool({ name: 'plain_schema', arguments: { n: 21 } })), '42');
    assert.deepEqual(seen.plain, { n: 21 });
    assert.equal(textOf(await client.callTool({ name: 'ark_tool', arguments: { id: 'a', count: 3 } })), 'a:3');
    assert.deepEqual(seen.ark, { id: 'a', count: 3 });
  });

  it('advertises the Standard Schema as its JSON Schema', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.find((t) => t.name === 'ark_tool').inputSchema, {
      type: 'object',
      properties: { id: { type: 'string' }, count: { type: 'number', minimum: 1, maximum: 5 } },
      required: ['id'],
    });
  });
});

describe('the call', () => {
  it('tells the handler its id, tool, caller and deadline', async () => {
    let got;
    await connect([
      defineTool({
        name: 'whoami',
        description: 'd',
        inputSchema: obj,
        handler: (_args, call) => {
          got = call;
          return 'me';
        },
      }),
      defineTool({ name: 'whoami_quick', description: 'd', inputSchema: obj, timeoutMs: 5000, handler: (_a, call) => call.deadline }),
    ]);
    const t0 = Date.now();
    await client.callTool({ name: 'whoami', arguments: {} });
    const t1 = Date.now();
    assert.match(got.callId, /^c-/);
    assert.equal(got.tool, 'whoami');
    assert.equal(got.kind, 'tool');
    assert.match(got.caller.keyId, /^key_/);
    assert.deepEqual(Object.keys(got.caller), ['keyId', 'keyName']);
    assert.equal(typeof got.caller.keyName, 'string');
    // A client key speaks for no one person: no person, no app, no role.
    assert.deepEqual(
      { person: got.person, app: got.app, project: got.project, role: got.role, scopes: got.scopes, identityToken: got.identityToken },
      { person: undefined, app: undefined, project: 'default', role: '', scopes: ['mcp:read', 'mcp:write'], identityToken: '' },
    );
    assert.equal(got.agent, undefined);
    assert.ok(got.deadline >= t0 + 30_000 - 50 && got.deadline <= t1 + 30_000 + 50, `deadline ${got.deadline - t0} ms after the call`);
    assert.equal(got.signal.aborted, false);

    const s0 = Date.now();
    const deadline = Number(textOf(await client.callTool({ name: 'whoami_quick', arguments: {} })));
    const s1 = Date.now();
    assert.ok(deadline >= s0 + 5000 - 50 && deadline <= s1 + 5000 + 50, `deadline ${deadline - s0} ms after the call`);
  });

  it('carries the client\'s W3C traceparent from _meta to the handler', async () => {
    const seen = [];
    await connect([
      defineTool({
        name: 'traced',
        description: 'd',
        inputSchema: obj,
        handler: (_args, call) => {
          seen.push({ traceparent: call.traceparent, tracestate: call.tracestate });
          return 'ok';
        },
      }),
    ]);
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    // The test gateway exports no traces: it passes the client's context on as it is.
    await client.callTool({ name: 'traced', arguments: {}, _meta: { traceparent: tp, tracestate: 'vendor=x' } });
    await client.callTool({ name: 'traced', arguments: {} });
    assert.deepEqual(seen, [
      { traceparent: tp, tracestate: 'vendor=x' },
      { traceparent: '', tracestate: '' },
    ]);
  });

  it('passes progress lines to the client: 4 a second, the latest wins, cut to 200 characters', async () => {
    await connect([
      defineTool({
        name: 'progress_burst',
        description: 'd',
        inputSchema: obj,
        handler: async (_args, call) => {
          for (let i = 1; i <= 10; i++) call.progress(`line ${i}`);
          await new Promise((r) => setTimeout(r, 1300));
          return 'done';
        },
      }),
      defineTool({
        name: 'progress_long',
        description: 'd',
        inputSchema: obj,
        handler: async (_args, call) => {
          call.progress('€'.repeat(250));
          await new Promise((r) => setTimeout(r, 100));
          return 'done';
        },
      }),
      defineTool({
        name: 'progress_then_result',
        description: 'd',
        inputSchema: obj,
        handler: async (_args, call) => {
          for (let i = 1; i <= 6; i++) call.progress(`step ${i}`);
          await new Promise((r) => setTimeout(r, 200));
          return 'done';
        },
      }),
    ]);
    const run = async (name) => {
      const lines = [];
      const r = await client.callTool({ name, arguments: {} }, undefined, { onprogress: (p) => lines.push(p.message) });
      assert.equal(textOf(r), 'done');
      return lines;
    };
    assert.deepEqual(await run('progress_burst'), ['line 1', 'line 2', 'line 3', 'line 4', 'line 10']);
    assert.deepEqual(await run('progress_long'), ['€'.repeat(200)]);
    // The held line (step 6) never follows the result.
    assert.deepEqual(await run('progress_then_result'), ['step 1', 'step 2', 'step 3', 'step 4']);
  });

  it(
    'delivers the progress lines sent just before the result',
    async () => {
      await connect([
        defineTool({
          name: 'progress_sync',
          description: 'd',
          inputSchema: obj,
          handler: (_args, call) => {
            for (let i = 1; i <= 4; i++) call.progress(`step ${i}`);
            return 'done';
          },
        }),
      ]);
      for (let round = 0; round < 5; round++) {
        const lines = [];
        const r = await client.callTool({ name: 'progress_sync', arguments: {} }, undefined, { onprogress: (p) => lines.push(p.message) });
        assert.equal(textOf(r), 'done');
        assert.deepEqual(lines, ['step 1', 'step 2', 'step 3', 'step 4'], `round ${round}`);
      }
    },
  );

  it('aborts call.signal when the client cancels', async () => {
    const started = [];
    let reason;
    await connect([
      defineTool({
        name: 'cancel_me',
        description: 'd',
        inputSchema: obj,
        handler: async (_args, call) => {
          started.push(call.callId);
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reason = call.signal.reason;
          return 'late';
        },
      }),
    ]);
    const ac = new AbortController();
    const pending = client.callTool({ name: 'cancel_me', arguments: {} }, undefined, { signal: ac.signal });
    await waitFor(() => started.length === 1, { what: 'the handler to start' });
    ac.abort('the user pressed stop');
    await assert.rejects(pending);
    await waitFor(() => reason, { what: 'the signal to abort' });
    assert.equal(reason.message, 'The client cancelled the call.');
  });

  it('times out after timeoutMs: the client is told, call.signal aborts', async () => {
    let reason;
    await connect([
      defineTool({
        name: 'too_slow',
        description: 'd',
        inputSchema: obj,
        timeoutMs: 300,
        handler: async (_args, call) => {
          await new Promise((r) => call.signal.addEventListener('abort', r));
          reason = call.signal.reason;
          return 'late';
        },
      }),
    ]);
    const r = await client.callTool({ name: 'too_slow', arguments: {} });
    assert.deepEqual(r, { content: [{ type: 'text', text: 'Request for tool "too_slow" timed out after 300ms' }], isError: true });
    await waitFor(() => reason, { what: 'the signal to abort' });
    assert.equal(reason.name, 'TimeoutError');
  });
});

describe('repeat-safe writes (idempotencyKey)', () => {
  const deliveries = {};
  const seen = [];
  before(async () => {
    await connect([
      defineTool({
        name: 'repeat_create',
        description: 'Create an order.',
        inputSchema: z.object({ requestId: z.string().describe('A unique id for this attempt.'), total: z.number() }),
        idempotencyKey: 'requestId',
        handler: ({ requestId }, call) => {
          deliveries[requestId] = (deliveries[requestId] ?? 0) + 1;
          seen.push({ requestId, retryOf: call.retryOf, retryReason: call.retryReason, callId: call.callId });
          return `order ${requestId}/${deliveries[requestId]}`;
        },
      }),
      defineTool({
        name: 'repeat_slow',
        description: 'Create an order, slowly.',
        inputSchema: z.object({ requestId: z.string() }),
        idempotencyKey: 'requestId',
        timeoutMs: 300,
        handler: async ({ requestId }, call) => {
          seen.push({ requestId, retryOf: call.retryOf, retryReason: call.retryReason, callId: call.callId });
          if (call.retryOf) return `reconciled ${call.retryOf}`;
          await new Promise((r) => call.signal.addEventListener('abort', r));
          return 'late';
        },
      }),
    ]);
  });

  it('tells the model to reuse the id, in the argument\'s description', async () => {
    const { tools } = await client.listTools();
    const props = tools.find((t) => t.name === 'repeat_create').inputSchema.properties;
    assert.equal(props.requestId.description, 'A unique id for this attempt. Reuse the same value when you retry this call, so it takes effect only once.');
  });

  it('delivers a call repeated with one requestId once, and answers the repeat with the first result', async () => {
    const args = { requestId: 'r-1', total: 5 };
    const first = await client.callTool({ name: 'repeat_create', arguments: args });
    const again = await client.callTool({ name: 'repeat_create', arguments: args });
    assert.deepEqual(first, { content: [{ type: 'text', text: 'order r-1/1' }] });
    assert.deepEqual(again, first);
    assert.equal(deliveries['r-1'], 1);
  });

  it('refuses the requestId with other arguments before the agent sees it', async () => {
    await client.callTool({ name: 'repeat_create', arguments: { requestId: 'r-81', total: 5 } });
    const r = await client.callTool({ name: 'repeat_create', arguments: { requestId: 'r-81', total: 6 } });
    assert.deepEqual(r, {
      content: [{ type: 'text', text: 'requestId "r-81" was already used for repeat_create with other arguments.' }],
      isError: true,
    });
    assert.equal(deliveries['r-81'], 1);
  });

  it('delivers again after a timeout, with call.retryOf and call.retryReason', async () => {
    const first = await client.callTool({ name: 'repeat_slow', arguments: { requestId: 'r-slow' } });
    assert.deepEqual(first, { content: [{ type: 'text', text: 'Request for tool "repeat_slow" timed out after 300ms' }], isError: true });
    const again = await client.callTool({ name: 'repeat_slow', arguments: { requestId: 'r-slow' } });
    const calls = seen.filter((c) => c.requestId === 'r-slow');
    assert.equal(calls.length, 2);
    assert.deepEqual(calls[0], { requestId: 'r-slow', retryOf: '', retryReason: '', callId: calls[0].callId });
    assert.deepEqual(calls[1], { requestId: 'r-slow', retryOf: calls[0].callId, retryReason: 'timeout', callId: calls[1].callId });
    assert.deepEqual(again, { content: [{ type: 'text', text: `reconciled ${calls[0].callId}` }] });
  });
});

describe('structured results', () => {
  it('advertises outputSchema and sends structuredContent beside the JSON text', async () => {
    await connect([
      defineTool({
        name: 'order_summary',
        description: 'd',
        inputSchema: obj,
        outputSchema: z.object({ id: z.string(), total: z.number().int() }),
        annotations: { readOnlyHint: true },
        handler: () => ({ id: '1042', total: 2599 }),
      }),
    ]);
    const { tools } = await client.listTools();
    assert.deepEqual(tools.find((t) => t.name === 'order_summary').outputSchema, {
      type: 'object',
      properties: { id: { type: 'string' }, total: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 } },
      required: ['id', 'total'],
      additionalProperties: false,
    });
    assert.deepEqual(await client.callTool({ name: 'order_summary', arguments: {} }), {
      content: [{ type: 'text', text: '{"id":"1042","total":2599}' }],
      structuredContent: { id: '1042', total: 2599 },
    });
  });
});

describe('resources', () => {
  before(async () => {
    await connect([
      defineResource({
        uri: 'orders://open',
        name: 'Open orders',
        description: 'Every order that has not shipped yet',
        mimeType: 'application/json',
        handler: async () => [{ id: '1042', status: 'open' }],
      }),
      defineResource({ uri: 'notes://readme', name: 'Readme', handler: () => 'Read me first.' }),
      defineResource({ uri: 'notes://plain', name: 'Plain', mimeType: 'text/plain', handler: () => 'hi' }),
      defineResourceTemplate({
        uriTemplate: 'orders://orders/{id}',
        name: 'Order',
        description: 'One order by id',
        handler: ({ uri, params }) => ({ id: params.id, uri }),
      }),
      defineResource({ uri: 'notes://logo', name: 'Logo', mimeType: 'image/png', handler: () => Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0xff]) }),
      defineResource({
        uri: 'broken://catalogue',
        name: 'Catalogue',
        handler: () => {
          throw new Error('The catalogue is offline; try again in a minute.');
        },
      }),
    ]);
  });

  it('lists resources with their mimeType, application/json by default', async () => {
    const { resources } = await client.listResources();
    const byUri = Object.fromEntries(resources.map((r) => [r.uri, r]));
    assert.deepEqual(byUri['orders://open'], {
      uri: 'orders://open', name: 'Open orders', description: 'Every order that has not shipped yet', mimeType: 'application/json',
    });
    assert.deepEqual(byUri['notes://readme'], { uri: 'notes://readme', name: 'Readme', mimeType: 'application/json' });
    assert.deepEqual(byUri['notes://plain'], { uri: 'notes://plain', name: 'Plain', mimeType: 'text/plain' });
  });

  it('reads a value as JSON and a string as is', async () => {
    assert.deepEqual((await client.readResource({ uri: 'orders://open' })).contents, [
      { uri: 'orders://open', mimeType: 'application/json', text: '[{"id":"1042","status":"open"}]' },
    ]);
    assert.deepEqual((await client.readResource({ uri: 'notes://readme' })).contents, [
      { uri: 'notes://readme', mimeType: 'application/json', text: 'Read me first.' },
    ]);
    assert.deepEqual((await client.readResource({ uri: 'notes://plain' })).contents, [{ uri: 'notes://plain', mimeType: 'text/plain', text: 'hi' }]);
  });

  it('lists a resource template apart and reads any URI it matches', async () => {
    const { resourceTemplates } = await client.listResourceTemplates();
    assert.deepEqual(resourceTemplates, [
      { uriTemplate: 'orders://orders/{id}', name: 'Order', description: 'One order by id', mimeType: 'application/json' },
    ]);
    const { resources } = await client.listResources();
    assert.ok(!resources.some((r) => r.uri.includes('{')), JSON.stringify(resources));
    assert.deepEqual((await client.readResource({ uri: 'orders://orders/1042' })).contents, [
      { uri: 'orders://orders/1042', mimeType: 'application/json', text: '{"id":"1042","uri":"orders://orders/1042"}' },
    ]);
    await assert.rejects(client.readResource({ uri: 'orders://customers/ada' }), (err) => /Resource not found/.test(err.message));
  });

  it('tells a subscribed client when the agent says a resource changed', async () => {
    const { agent } = await connect([defineResource({ uri: 'notes://news', name: 'News', handler: () => 'today' })]);
    const updated = [];
    const c = await gw.client(gw.clientKey, {
      setup: (cl) => cl.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updated.push(n.params.uri)),
    });
    try {
      await c.subscribeResource({ uri: 'notes://news' });
      await agent.resourceChanged('notes://news');
      await waitFor(() => updated.length === 1, { what: 'notifications/resources/updated' });
      assert.deepEqual(updated, ['notes://news']);
      await assert.rejects(agent.resourceChanged('notes://nope'), /no resource or template of this agent/);
    } finally {
      await c.close();
    }
  });

  it('reads bytes as a blob, base64 on the wire', async () => {
    assert.deepEqual((await client.readResource({ uri: 'notes://logo' })).contents, [
      { uri: 'notes://logo', mimeType: 'image/png', blob: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0xff]).toString('base64') },
    ]);
  });

  it('fails a throwing read with JSON-RPC error -32603 and the message', async () => {
    await assert.rejects(client.readResource({ uri: 'broken://catalogue' }), (err) => {
      assert.equal(err.code, -32603);
      assert.equal(err.message, 'MCP error -32603: The catalogue is offline; try again in a minute.');
      return true;
    });
  });
});

describe('prompts', () => {
  before(async () => {
    await connect([
      definePrompt({
        name: 'summarise_order',
        title: 'Summarise an order',
        description: 'Write a short, polite summary of an order for a support reply.',
        argsSchema: z.object({ id: z.string().describe('The order id'), tone: z.string().optional().describe('How formal') }),
        handler: ({ id, tone }) => `Summarise order ${id}${tone ? ` in a ${tone} tone` : ''}.`,
      }),
      definePrompt({
        name: 'support_chat',
        description: 'A short exchange.',
        handler: () => ({
          messages: [
            { role: 'user', content: 'My order is late.' },
            { role: 'assistant', content: { type: 'text', text: 'Sorry to hear that. What is the order id?' } },
          ],
        }),
      }),
      definePrompt({
        name: 'prompt_throws',
        handler: () => {
          throw new Error('The template store is down.');
        },
      }),
    ]);
  });

  it('lists prompts with their arguments', async () => {
    const { prompts } = await client.listPrompts();
    assert.deepEqual(prompts.find((p) => p.name === 'summarise_order'), {
      name: 'summarise_order',
      title: 'Summarise an order',
      description: 'Write a short, polite summary of an order for a support reply.',
      arguments: [
        { name: 'id', description: 'The order id', required: true },
        { name: 'tone', description: 'How formal' },
      ],
    });
  });

  it('renders a string as one user message, and a messages form', async () => {
    assert.deepEqual(await client.getPrompt({ name: 'summarise_order', arguments: { id: '1042', tone: 'warm' } }), {
      messages: [{ role: 'user', content: { type: 'text', text: 'Summarise order 1042 in a warm tone.' } }],
    });
    assert.deepEqual((await client.getPrompt({ name: 'support_chat' })).messages, [
      { role: 'user', content: { type: 'text', text: 'My order is late.' } },
      { role: 'assistant', content: { type: 'text', text: 'Sorry to hear that. What is the order id?' } },
    ]);
  });

  it('refuses a missing required argument before the handler', async () => {
    await assert.rejects(client.getPrompt({ name: 'summarise_order', arguments: {} }), {
      code: -32602,
      message: "MCP error -32602: Invalid arguments for prompt summarise_order: data must have required property 'id'",
    });
  });

  it('fails a throwing prompt with the message', async () => {
    await assert.rejects(client.getPrompt({ name: 'prompt_throws' }), {
      code: -32603,
      message: 'MCP error -32603: The template store is down.',
    });
  });
});

describe('registration', () => {
  it('setEnabled hides and shows a tool, with tools/list_changed', async (t) => {
    const changes = [];
    const c = await gw.client();
    t.after(() => c.close());
    c.setNotificationHandler(ToolListChangedNotificationSchema, () => changes.push(Date.now()));
    const { agent } = await connect([
      defineTool({ name: 'toggle_me', description: 'd', inputSchema: obj, handler: () => 'on' }),
    ]);
    await waitFor(async () => (await toolNames(c)).includes('toggle_me'));
    const before = changes.length;

    await agent.setEnabled('toggle_me', false);
    await waitFor(() => changes.length > before, { what: 'tools/list_changed' });
    assert.equal((await toolNames(c)).includes('toggle_me'), false);
    await assert.rejects(c.callTool({ name: 'toggle_me', arguments: {} }), {
      code: -32602,
      message: 'MCP error -32602: Tool toggle_me not found',
    });

    const mid = changes.length;
    await agent.setEnabled('toggle_me', true);
    await waitFor(() => changes.length > mid, { what: 'tools/list_changed' });
    assert.equal(textOf(await c.callTool({ name: 'toggle_me', arguments: {} })), 'on');
  });

  it('registers a tool switched off before connect', async () => {
    const logger = memoryLogger();
    const agent = new Agent({ apiKey: await gw.newKey(), url: gw.url, logger });
    agents.push(agent);
    agent.register(defineTool({ name: 'starts_off', description: 'd', inputSchema: obj, handler: () => 'on now' }));
    await agent.setEnabled('starts_off', false);
    agent.register(defineTool({ name: 'beside_it', description: 'd', inputSchema: obj, handler: () => 1 }));
    await agent.connect();
    await untilTool('beside_it');
    assert.equal((await toolNames(client)).includes('starts_off'), false);
    await agent.setEnabled('starts_off', true);
    await untilTool('starts_off');
    assert.equal(textOf(await client.callTool({ name: 'starts_off', arguments: {} })), 'on now');
  });

  it('replaces an earlier definition of the same name', async () => {
    const agent = new Agent({ apiKey: await gw.newKey(), url: gw.url, logger: memoryLogger() });
    agents.push(agent);
    agent.register([
      defineTool({ name: 'replace_me', description: 'first', inputSchema: obj, handler: () => 'one' }),
      defineResource({ uri: 'replace://me', name: 'First', handler: () => 'one' }),
      definePrompt({ name: 'replace_prompt', description: 'first', handler: () => 'one' }),
    ]);
    agent.register([
      defineTool({ name: 'replace_me', description: 'second', inputSchema: obj, handler: () => 'two' }),
      defineResource({ uri: 'replace://me', name: 'Second', handler: () => 'two' }),
      definePrompt({ name: 'replace_prompt', description: 'second', handler: () => 'two' }),
    ]);
    await agent.connect();
    await untilVisible(client, [
      defineTool({ name: 'replace_me', description: 'd', inputSchema: obj, handler: () => 0 }),
      defineResource({ uri: 'replace://me', name: 'd', handler: () => 0 }),
      definePrompt({ name: 'replace_prompt', handler: () => 0 }),
    ]);
    const { tools } = await client.listTools();
    assert.deepEqual(tools.filter((t) => t.name === 'replace_me').map((t) => t.description), ['second']);
    assert.equal(textOf(await client.callTool({ name: 'replace_me', arguments: {} })), 'two');
    const { resources } = await client.listResources();
    assert.deepEqual(resources.filter((r) => r.uri === 'replace://me').map((r) => r.name), ['Second']);
    assert.equal((await client.readResource({ uri: 'replace://me' })).contents[0].text, 'two');
    const { prompts } = await client.listPrompts();
    assert.deepEqual(prompts.filter((p) => p.name === 'replace_prompt').map((p) => p.description), ['second']);
    assert.equal((await client.getPrompt({ name: 'replace_prompt' })).messages[0].content.text, 'two');
  });

  it('logs the refusal of an invalid name and keeps retrying', async () => {
    const logger = memoryLogger();
    const agent = new Agent({ apiKey: await gw.newKey(), url: gw.url, logger });
    agent.register([
      defineTool({ name: 'fine_tool', description: 'd', inputSchema: obj, handler: () => 1 }),
      defineTool({ name: 'bad name', description: 'd', inputSchema: obj, handler: () => 1 }),
    ]);
    const connected = agent.connect();
    const refusals = () => logger.lines.filter((l) => l.level === 'error' && l.msg.includes('400 Bad Request: Invalid tool name "bad name".'));
    await waitFor(() => refusals().length >= 2, { what: 'two logged refusals' });
    await agent.close();
    await connected;
    assert.equal(refusals()[0].msg.replace(/in 0\.[23] s/, 'in 0.x s'), 'spacefix: the gateway refused the agent (retrying in 0.x s, attempt 1): register: 400 Bad Request: Invalid tool name "bad name".');
    assert.equal(logger.lines[0].msg, 'spacefix: Invalid tool name "bad name". The gateway will refuse the connection until the name is fixed.');
    assert.equal((await toolNames(client)).includes('fine_tool'), false);

    const reserved = memoryLogger();
    const a2 = new Agent({ apiKey: await gw.newKey(), url: gw.url, logger: reserved });
    a2.register(defineTool({ name: 'github__search', description: 'd', inputSchema: obj, handler: () => 1 }));
    void a2.connect();
    await waitFor(() => reserved.lines.some((l) => l.level === 'error'), { what: 'a logged refusal' });
    await a2.close();
    assert.ok(
      reserved.lines.some((l) => l.msg.includes('400 Bad Request: Invalid tool name "github__search": names containing "__" are reserved for bridged MCP servers.')),
      JSON.stringify(reserved.lines),
    );
  });
});

describe('keys and lifecycle', () => {
  it('logs a wrong key, and a client key, with the gateway\'s text and keeps retrying', async () => {
    for (const [apiKey, want] of [
      ['sfx_agent_WRONG', 'register: 401 Unauthorized: Unknown or revoked agent key. Create one with: spacefix keys create --kind agent'],
      [gw.clientKey, 'register: 403 Forbidden: This is a client key. Agents connect with an agent key: spacefix keys create --kind agent'],
    ]) {
      const logger = memoryLogger();
      const agent = new Agent({ apiKey, url: gw.url, logger });
      const connected = agent.connect();
      const refusals = () => logger.lines.filter((l) => l.level === 'error' && l.msg.endsWith(`): ${want}`));
      await waitFor(() => refusals().length >= 2, { what: `two refusals ending in ${want}` });
      await agent.close();
      await connected;
      assert.equal(agent.connected, false);
    }
  });

  it('lets the process exit once the agent is closed', async () => {
    const apiKey = await gw.newKey();
    const script = `
      import { Agent, defineTool } from ${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)};
      const agent = new Agent({ apiKey: ${JSON.stringify(apiKey)}, url: ${JSON.stringify(gw.url)} });
      agent.register(defineTool({ name: 'exit_probe', description: 'd', inputSchema: { type: 'object' }, handler: () => 1 }));
      await agent.connect();
      await agent.close();
      console.log('closed');`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (out += d));
    const code = await Promise.race([
      new Promise((r) => child.once('exit', r)),
      new Promise((r) => setTimeout(() => r('still running after 2 s'), 2000).unref()),
    ]);
    child.kill('SIGKILL');
    assert.equal(code, 0, out);
    assert.match(out, /spacefix: connected to the gateway .*\nclosed\n$/);
  });
});

describe('namespaces and instances', () => {
  it('exposes a namespaced agent\'s tools as <name>_<tool>', async () => {
    let seenTool;
    await connect(
      [
        defineTool({
          name: 'run_tests',
          description: 'Runs the tests.',
          inputSchema: obj,
          handler: (_args, call) => {
            seenTool = call.tool;
            return 'All tests passed';
          },
        }),
      ],
      { name: 'test-radar', namespace: true },
    );
    await untilTool('test_radar_run_tests');
    assert.equal((await toolNames(client)).includes('run_tests'), false);
    assert.equal(textOf(await client.callTool({ name: 'test_radar_run_tests', arguments: {} })), 'All tests passed');
    assert.equal(seenTool, 'run_tests');
  });

  it('lets a caller pick an instance when replicas name theirs', async () => {
    const apiKey = await gw.newKey();
    const mk = (instance) =>
      connect([defineTool({ name: 'where_am_i', description: 'd', inputSchema: obj, handler: (args) => `${instance} ${JSON.stringify(args)}` })], { apiKey, instance });
    await mk('eu-1');
    await mk('us-1');
    const t = await waitFor(
      async () => {
        const found = (await client.listTools()).tools.find((x) => x.name === 'where_am_i');
        return found?.inputSchema.properties?.instance?.enum?.length === 2 && found;
      },
      { what: 'the instance argument to list both instances' },
    );
    assert.deepEqual(t.inputSchema.properties.instance.enum.slice().sort(), ['eu-1', 'us-1']);
    assert.equal(t.inputSchema.required?.includes('instance') ?? false, false);
    for (let i = 0; i < 4; i++) {
      assert.equal(textOf(await client.callTool({ name: 'where_am_i', arguments: { instance: 'us-1' } })), 'us-1 {}');
      assert.equal(textOf(await client.callTool({ name: 'where_am_i', arguments: { instance: 'eu-1' } })), 'eu-1 {}');
    }
  });
});

describe('asking the user (call.confirm)', () => {
  const seen = [];
  let answer = 'accept';
  const asked = [];
  let elicitor;

  before(async () => {
    await connect([
      defineTool({
        name: 'delete_order',
        description: 'Deletes an order after asking the user.',
        inputSchema: z.object({ id: z.string() }),
        annotations: { destructiveHint: true },
        handler: async ({ id }, call) => {
          try {
            const ok = await call.confirm(`Delete order ${id}?`);
            seen.push({ id, ok });
            return ok ? `deleted order ${id}` : `kept order ${id}`;
          } catch (err) {
            seen.push({ id, error: err });
            throw err;
          }
        },
      }),
    ]);
    elicitor = await gw.client(gw.clientKey, {
      capabilities: { elicitation: {} },
      setup: (c) =>
        c.setRequestHandler(ElicitRequestSchema, (req) => {
          asked.push(req.params);
          return answer === 'accept' ? { action: 'accept', content: { confirm: true } } : { action: answer };
        }),
    });
  });

  after(() => elicitor?.close());

  it('resolves true when the user accepts', async () => {
    const r = await elicitor.callTool({ name: 'delete_order', arguments: { id: '1042' } });
    assert.deepEqual(r, { content: [{ type: 'text', text: 'deleted order 1042' }] });
    assert.equal(asked.length, 1);
    assert.equal(asked[0].message, 'Delete order 1042?');
    assert.equal(asked[0].requestedSchema.properties.confirm.type, 'boolean');
    assert.deepEqual(seen.at(-1), { id: '1042', ok: true });
  });

  it('resolves false when the user declines', async () => {
    answer = 'decline';
    const r = await elicitor.callTool({ name: 'delete_order', arguments: { id: '1043' } });
    assert.deepEqual(r, { content: [{ type: 'text', text: 'kept order 1043' }] });
    assert.equal(asked.at(-1).message, 'Delete order 1043?');
    assert.deepEqual(seen.at(-1), { id: '1043', ok: false });
  });

  it('rejects with CannotConfirmError when the client cannot elicit', async () => {
    const r = await client.callTool({ name: 'delete_order', arguments: { id: '1044' } });
    assert.equal(r.isError, true);
    assert.ok(textOf(r).startsWith('the MCP client cannot ask the user'), textOf(r));
    const { error } = seen.at(-1);
    assert.ok(error instanceof CannotConfirmError, String(error));
    assert.equal(textOf(r), error.message);
    assert.match(error.message, /^the MCP client cannot ask the user: .*elicitation/);
  });
});

describe('asking the client (call.elicit, call.sample, call.roots)', () => {
  const seen = [];
  let asker;
  let seats = 4;

  before(async () => {
    const settle = async (f) => {
      try {
        const v = await f();
        seen.push({ value: v });
        return v;
      } catch (err) {
        seen.push({ error: err });
        throw err;
      }
    };
    await connect([
      defineTool({
        name: 'node_book',
        description: 'Books a table, asking the user for the details.',
        inputSchema: z.object({ at: z.string() }),
        handler: ({ at }, call) =>
          settle(async () => {
            const r = await call.elicit(`Book a table at ${at}?`, {
              type: 'object',
              properties: {
                name: { type: 'string', title: 'Name' },
                seats: { type: 'integer', minimum: 1, maximum: 8, default: 2 },
              },
              required: ['name', 'seats'],
            });
            return r.action === 'accept' ? `booked ${r.content.seats} for ${r.content.name}` : `not booked (${r.action})`;
          }),
      }),
      defineTool({
        name: 'node_summarise',
        description: "Summarises with the client's model.",
        inputSchema: z.object({ text: z.string() }),
        annotations: { readOnlyHint: true },
        handler: ({ text }, call) =>
          settle(async () => {
            const r = await call.sample({ messages: [{ role: 'user', content: { type: 'text', text } }], maxTokens: 40, systemPrompt: 'Be brief.' });
            const parts = Array.isArray(r.content) ? r.content : [r.content];
            return `${r.model} wrote: ${parts.map((p) => p.text).join('')}`;
          }),
      }),
      definePrompt({
        name: 'node_greet',
        handler: async (_args, call) => {
          const r = await call.elicit('What is your name?', { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] });
          return `Hello, ${r.content.name}!`;
        },
      }),
      defineTool({
        name: 'node_plan',
        description: "Asks for a form, a model's message and the roots in one round.",
        inputSchema: obj,
        annotations: { readOnlyHint: true },
        handler: (_args, call) =>
          settle(async () => {
            const r = await call.together({
              elicit: { message: 'Book a table?', schema: { type: 'object', properties: { name: { type: 'string' }, seats: { type: 'integer' } } } },
              sample: { messages: [{ role: 'user', content: { type: 'text', text: 'Plan: Rome' } }], maxTokens: 20, systemPrompt: 'Plan.' },
              roots: true,
            });
            return `${r.elicit.action} ${r.elicit.content.name} | ${r.sample.model} | ${r.roots.length} root(s)`;
          }),
      }),
      defineTool({
        name: 'node_workspace',
        description: 'Says where the user works.',
        inputSchema: obj,
        annotations: { readOnlyHint: true },
        handler: (_args, call) => settle(async () => (await call.roots()).map((r) => `${r.name}=${r.uri}`).join(',')),
      }),
    ]);
    asker = await gw.client(gw.clientKey, {
      capabilities: { elicitation: {}, sampling: {}, roots: {} },
      setup: (c) => {
        c.setRequestHandler(ElicitRequestSchema, () => ({ action: 'accept', content: { name: 'Ada', seats } }));
        c.setRequestHandler(CreateMessageRequestSchema, (req) => ({
          role: 'assistant',
          model: 'ts-model',
          content: { type: 'text', text: `${req.params.systemPrompt} ${req.params.messages[0].content.text.length} chars.` },
        }));
        c.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [{ uri: 'file:///home/ada/shop', name: 'shop' }] }));
      },
    });
  });

  after(() => asker?.close());

  it('elicit resolves with the form the user filled in', async () => {
    const r = await asker.callTool({ name: 'node_book', arguments: { at: "Luigi's" } });
    assert.deepEqual(r, { content: [{ type: 'text', text: 'booked 4 for Ada' }] });
  });

  it('elicit rejects an answer that breaks the form, with the gateway saying why', async () => {
    seats = 20;
    const r = await asker.callTool({ name: 'node_book', arguments: { at: "Luigi's" } });
    seats = 4;
    assert.equal(r.isError, true);
    assert.match(textOf(r), /does not match.*seats/);
  });

  it("sample resolves with what the client's model wrote", async () => {
    const r = await asker.callTool({ name: 'node_summarise', arguments: { text: 'a long menu' } });
    assert.deepEqual(r, { content: [{ type: 'text', text: 'ts-model wrote: Be brief. 11 chars.' }] });
  });

  it("roots resolves with the client's roots", async () => {
    const r = await asker.callTool({ name: 'node_workspace', arguments: {} });
    assert.deepEqual(r, { content: [{ type: 'text', text: 'shop=file:///home/ada/shop' }] });
  });

  it('a prompt handler asks too', async () => {
    const r = await asker.getPrompt({ name: 'node_greet' });
    assert.deepEqual(r.messages, [{ role: 'user', content: { type: 'text', text: 'Hello, Ada!' } }]);
  });

  it('together asks for several inputs in one round', async () => {
    const r = await asker.callTool({ name: 'node_plan', arguments: {} });
    assert.deepEqual(r, { content: [{ type: 'text', text: 'accept Ada | ts-model | 1 root(s)' }] });
  });

  it('rejects with MissingCapabilityError when the client cannot sample', async () => {
    const r = await client.callTool({ name: 'node_summarise', arguments: { text: 'x' } });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /did not declare the sampling capability/);
    const { error } = seen.at(-1);
    assert.ok(error instanceof MissingCapabilityError, String(error));
    assert.equal(error.code, -32021);
  });
});

describe('switching prompts and resources off (setPromptEnabled, setResourceEnabled)', () => {
  it('takes them out of the lists and puts them back', async () => {
    const { agent } = await connect([
      definePrompt({ name: 'node_switch_prompt', handler: () => 'hi' }),
      defineResource({ uri: 'notes://switch', name: 'Switch', handler: () => 'x' }),
    ]);
    const listed = async () => [
      (await client.listPrompts()).prompts.some((p) => p.name === 'node_switch_prompt'),
      (await client.listResources()).resources.some((r) => r.uri === 'notes://switch'),
    ];
    await agent.setPromptEnabled('node_switch_prompt', false);
    await agent.setResourceEnabled('notes://switch', false);
    await waitFor(async () => JSON.stringify(await listed()) === '[false,false]', { what: 'the prompt and resource to go' });
    await agent.setPromptEnabled('node_switch_prompt', true);
    await agent.setResourceEnabled('notes://switch', true);
    await waitFor(async () => JSON.stringify(await listed()) === '[true,true]', { what: 'the prompt and resource to come back' });
    await assert.rejects(agent.setPromptEnabled('nope', false), /no prompt named "nope"/);
  });
});

describe('completion (complete)', () => {
  it("asks the prompt's or template's completer, and answers none without one", async () => {
    const customers = ['ada', 'alan', 'bob'];
    await connect([
      definePrompt({
        name: 'node_summary',
        argsSchema: z.object({ customer: z.string(), style: z.string().optional() }),
        complete: { customer: (value) => customers.filter((c) => c.startsWith(value)) },
        handler: ({ customer }) => `Summarise ${customer}`,
      }),
      defineResourceTemplate({
        uriTemplate: 'orders://node/{customer}/{id}',
        name: 'Customer order',
        complete: (param, _value, args) => (param === 'id' ? [`${args.customer}-1`, `${args.customer}-2`] : []),
        handler: ({ params }) => params,
      }),
    ]);
    const values = async (ref, name, value, args) =>
      (await client.complete({ ref, argument: { name, value }, ...(args && { context: { arguments: args } }) })).completion.values;
    assert.deepEqual(await values({ type: 'ref/prompt', name: 'node_summary' }, 'customer', 'a'), ['ada', 'alan']);
    assert.deepEqual(await values({ type: 'ref/prompt', name: 'node_summary' }, 'style', 'br'), []);
    assert.deepEqual(await values({ type: 'ref/resource', uri: 'orders://node/{customer}/{id}' }, 'id', '', { customer: 'ada' }), ['ada-1', 'ada-2']);
  });
});

describe('logging to the client (call.log)', () => {
  it('sends notifications/message at or above the level the client asked for', async () => {
    await connect(
      [
        defineTool({
          name: 'node_noisy',
          description: 'Logs as it works.',
          inputSchema: obj,
          annotations: { readOnlyHint: true },
          handler: (_args, call) => {
            call.log('debug', 'looking closely');
            call.log('info', { step: 1, of: 2 });
            call.log('error', 'the second step failed');
            return 'done';
          },
        }),
      ],
      { name: 'shop' },
    );
    const got = [];
    const c = await gw.client(gw.clientKey, {
      setup: (cl) => cl.setNotificationHandler(LoggingMessageNotificationSchema, (n) => got.push(n.params)),
    });
    try {
      await c.setLoggingLevel('info');
      const r = await c.callTool({ name: 'node_noisy', arguments: {} });
      assert.equal(textOf(r), 'done');
      await waitFor(() => got.length >= 2, { what: 'two log messages' });
      assert.deepEqual(got, [
        { level: 'info', logger: 'shop', data: { step: 1, of: 2 } },
        { level: 'error', logger: 'shop', data: 'the second step failed' },
      ]);
    } finally {
      await c.close();
    }
  });
});

describe('rolling restart', () => {
  it('loses no call while the agent closes and a new replica with the same key connects', async () => {
    const work = (who) =>
      defineTool({
        name: 'roll_work',
        description: 'Takes about 30 ms.',
        inputSchema: z.object({ tag: z.string() }),
        handler: async ({ tag }) => {
          await new Promise((r) => setTimeout(r, 30));
          return `${tag} by ${who}`;
        },
      });
    const first = await connect([work('old')]);

    const callers = 4;
    const perCaller = 40;
    const failed = [];
    const by = {};
    const streams = Array.from({ length: callers }, async (_, c) => {
      const cl = await gw.client();
      try {
        for (let i = 0; i < perCaller; i++) {
          const tag = `${c}-${i}`;
          try {
            const r = await cl.callTool({ name: 'roll_work', arguments: { tag } });
            const text = textOf(r);
            if (r.isError || !text.startsWith(`${tag} by `)) failed.push(`${tag}: ${text}`);
            else {
              const who = text.slice(`${tag} by `.length);
              by[who] = (by[who] ?? 0) + 1;
            }
          } catch (err) {
            failed.push(`${tag}: ${err.message}`);
          }
        }
      } finally {
        await cl.close();
      }
    });

    await waitFor(() => (by.old ?? 0) >= 20, { what: 'calls to flow' });
    const t0 = Date.now();
    await first.agent.close();
    const closeMs = Date.now() - t0;
    const second = await startAgent(gw, [work('new')], { apiKey: first.apiKey });
    agents.push(second.agent);
    await Promise.all(streams);

    assert.deepEqual(failed, [], `${failed.length} of ${callers * perCaller} calls failed`);
    assert.ok(by.old > 0 && by.new > 0, `served by ${JSON.stringify(by)}`);
    assert.equal(by.old + by.new, callers * perCaller);
    assert.ok(closeMs >= 95 && closeMs < 2000, `close took ${closeMs} ms`);
    assert.ok(!first.logs.some((l) => l.level === 'warn' && /still running/.test(l.msg)), JSON.stringify(first.logs));
  });
});

describe('task support, protocol errors, several forms (issue 25)', () => {
  let asker;

  before(async () => {
    const form = { type: 'object', properties: { value: { type: 'string' } }, required: ['value'] };
    await connect([
      defineTool({ name: 'node_report', description: 'A slow report.', inputSchema: obj, execution: { taskSupport: 'optional' }, handler: () => 'done' }),
      defineTool({ name: 'node_export', description: 'A slow export.', inputSchema: obj, execution: { taskSupport: 'required' }, handler: () => 'done' }),
      defineTool({ name: 'node_quick', description: 'Quick.', inputSchema: obj, handler: () => 'done' }),
      defineTool({
        name: 'node_book_dates', description: 'Books, for dates that make sense.', inputSchema: obj,
        handler: () => { throw new ProtocolError(-32602, 'bad dates', { field: 'from' }); },
      }),
      defineResource({ uri: 'orders://node-archive', name: 'Archive', handler: () => { throw new ProtocolError(4001, 'the archive moved'); } }),
      defineTool({
        name: 'node_two_forms', description: 'Asks a name and a city in one round.', inputSchema: obj,
        handler: async (_args, call) => {
          const r = await call.together({ elicits: [{ message: 'Your name?', schema: form }, { message: 'Your city?', schema: form, id: 'city' }] });
          return r.elicits.map((e) => `${e.action} ${e.content?.value}`).join(', ');
        },
      }),
    ]);
    asker = await gw.client(gw.clientKey, {
      capabilities: { elicitation: {} },
      setup: (c) => c.setRequestHandler(ElicitRequestSchema, (req) => ({ action: 'accept', content: { value: req.params.message === 'Your name?' ? 'Ada' : 'Rome' } })),
    });
  });

  after(() => asker?.close());

  it('lists execution.taskSupport for optional and required tools only, in both eras', async () => {
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    assert.deepEqual(byName.node_report.execution, { taskSupport: 'optional' });
    assert.deepEqual(byName.node_export.execution, { taskSupport: 'required' });
    assert.equal('execution' in byName.node_quick, false);
    // 2026-07-28, as a client of that era asks.
    const res = await fetch(`${gw.url}/mcp`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${gw.clientKey}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        'Mcp-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/list',
      },
      body: JSON.stringify({
        jsonrpc: '2.0', id: 1, method: 'tools/list',
        params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} } },
      }),
    });
    const body = await res.text();
    const data = body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6))).find((m) => m.result?.tools) ?? JSON.parse(body);
    const modern = Object.fromEntries(data.result.tools.map((t) => [t.name, t]));
    assert.deepEqual(modern.node_report.execution, { taskSupport: 'optional' });
    assert.deepEqual(modern.node_export.execution, { taskSupport: 'required' });
    assert.equal('execution' in modern.node_quick, false);
  });

  it("fails the client's request with a thrown ProtocolError's code, message and data", async () => {
    await assert.rejects(client.callTool({ name: 'node_book_dates', arguments: {} }), (err) => {
      assert.equal(err.code, -32602);
      assert.match(err.message, /bad dates$/);
      assert.deepEqual(err.data, { field: 'from' });
      return true;
    });
    await assert.rejects(client.readResource({ uri: 'orders://node-archive' }), (err) => {
      assert.equal(err.code, 4001);
      assert.match(err.message, /the archive moved$/);
      return true;
    });
  });

  it('together asks two forms in one round', async () => {
    const r = await asker.callTool({ name: 'node_two_forms', arguments: {} });
    assert.deepEqual(r, { content: [{ type: 'text', text: 'accept Ada, accept Rome' }] });
  });
});

describe('the identity token (issue 27)', () => {
  const execFileP = promisify(execFile);
  const audience = 'https://orders.example.com';
  /** keysSet runs `spacefix keys set ID --identity-audience AUD`, as an owner would. */
  const keysSet = (id, aud) => execFileP(gw.bin, ['keys', 'set', id, '--identity-audience', aud, '--data', gw.db]);

  it('reaches the handler as call.identityToken and verifies with jose against /.well-known/jwks.json', async () => {
    const seen = [];
    await connect([
      defineTool({
        name: 'node_identity',
        description: 'd',
        inputSchema: obj,
        annotations: { readOnlyHint: true },
        handler: (_args, call) => {
          seen.push(call);
          return 'ok';
        },
      }),
    ]);
    // The agent key just made is the newest.
    const { stdout } = await execFileP(gw.bin, ['keys', 'list', '--data', gw.db, '--project', 'default', '--json']);
    const agentKey = JSON.parse(stdout).filter((k) => k.kind === 'agent').at(-1).id;

    await client.callTool({ name: 'node_identity', arguments: {} });
    assert.equal(seen.at(-1).identityToken, '', 'a key that asked for no token got one');

    await keysSet(agentKey, audience);
    const call = await waitFor(async () => {
      await client.callTool({ name: 'node_identity', arguments: {} });
      return seen.at(-1).identityToken ? seen.at(-1) : undefined;
    }, { what: 'a call with an identity token' });
    assert.equal(call.person, undefined);

    const jwks = createRemoteJWKSet(new URL(`${gw.url}/.well-known/jwks.json`));
    const t0 = Math.floor(Date.now() / 1000);
    const { payload, protectedHeader } = await jwtVerify(call.identityToken, jwks, {
      issuer: gw.url,
      audience,
      algorithms: ['ES256'],
    });
    assert.equal(protectedHeader.alg, 'ES256');
    assert.equal(payload.sub, `key:${call.caller.keyId}`);
    assert.equal(payload.project, 'default');
    assert.equal(payload.scope, 'mcp:read mcp:write');
    // The token's own id, not the call's: the gateway reuses a caller's
    // token for its calls until a minute before it expires (5 minutes).
    assert.ok(payload.jti && payload.jti !== call.callId, `jti ${payload.jti}`);
    assert.equal(payload.email, undefined);
    assert.ok(payload.exp <= t0 + 301 && payload.exp >= t0 + 60, `exp ${payload.exp - t0} s after the call`);

    // One altered byte (of the payload, then of the signature) fails.
    for (const part of [1, 2]) {
      const parts = call.identityToken.split('.');
      const i = Math.floor(parts[part].length / 2);
      parts[part] = parts[part].slice(0, i) + (parts[part][i] === 'A' ? 'B' : 'A') + parts[part].slice(i + 1);
      await assert.rejects(jwtVerify(parts.join('.'), jwks, { issuer: gw.url, audience }), `altered ${part === 1 ? 'payload' : 'signature'} verified`);
    }
    await assert.rejects(jwtVerify(call.identityToken, jwks, { issuer: gw.url, audience: 'https://someone-else.example.com' }));
    assert.ok(decodeProtectedHeader(call.identityToken).kid);

    // Empty turns it off.
    await keysSet(agentKey, '');
    await waitFor(async () => {
      await client.callTool({ name: 'node_identity', arguments: {} });
      return seen.at(-1).identityToken === '';
    }, { what: 'calls without a token' });
  });
});
