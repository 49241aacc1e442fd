// What the SDK does on the wire, played against the transcript player
// (player.mjs) with inline transcripts: the player is the only gateway these
// tests talk to. Behaviour through the real gateway is in gateway.test.mjs;
// the drain in drain.test.mjs, questions in confirm.test.mjs.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';

import { z } from 'zod';

import { Agent, definePrompt, defineResource, defineTool } from '../dist/index.js';
import { memoryLogger, waitFor } from './harness.mjs';
import { connected, exactly, player, script, setup, stopped, TEST_KEY, welcome } from './player.mjs';

describe('options', () => {
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
});

describe('wire behaviour', () => {
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

  it('registers through a URL with user:password@, the agent key as the credential', async (t) => {
    const gw = await player();
    t.after(() => gw.close());
    const agent = new Agent({ apiKey: TEST_KEY, url: gw.url.replace('http://', 'http://proxy:secret@'), logger: memoryLogger() });
    t.after(() => agent.close());
    await gw.play(agent, script(connected + stopped), { connected: () => agent.connect() });
    assert.equal(gw.registrations[0].auth, `Bearer ${TEST_KEY}`);
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

  it('registers a tool\'s idempotency key, and tells the handler a retry of an earlier call', async (t) => {
    const { gw, agent } = await setup(t);
    const seen = {};
    agent.register([
      defineTool({
        name: 'create_order', description: 'd', idempotencyKey: 'requestId',
        inputSchema: z.object({ requestId: z.string(), total: z.number() }),
        handler: (_args, call) => {
          seen[call.callId] = { retryOf: call.retryOf, retryReason: call.retryReason };
          return 'ok';
        },
      }),
    ]);
    await gw.play(agent, script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"create_order","args":{"requestId":"r-81","total":5}}
-- agent --
{"type":"result","id":"c-1"}
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"create_order","args":{"requestId":"r-81","total":5},"retryOf":"c-1","retryReason":"disconnected"}
-- agent --
{"type":"result","id":"c-2"}
`));
    assert.equal(gw.registrations[0].body.tools[0].idempotencyKey, 'requestId');
    assert.deepEqual(seen, {
      'c-1': { retryOf: '', retryReason: '' },
      'c-2': { retryOf: 'c-1', retryReason: 'disconnected' },
    });
  });

  it('tells the handler who is calling: the person, app, project, role, scopes and identity token', async (t) => {
    const { gw, agent } = await setup(t);
    const seen = {};
    const who = (call) => ({
      caller: call.caller, person: call.person, app: call.app, project: call.project,
      role: call.role, scopes: call.scopes, identityToken: call.identityToken,
    });
    agent.register([
      defineTool({ name: 'whoami', description: 'd', inputSchema: { type: 'object' }, handler: (_args, call) => { seen[call.callId] = who(call); return 'ok'; } }),
      defineResource({ uri: 'test://me', name: 'me', handler: (call) => { seen[call.callId] = who(call); return 'me'; } }),
    ]);
    await gw.play(agent, script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"whoami","args":{},"caller":{"keyId":"key_77","keyName":"Claude Desktop","person":{"id":"usr_1","email":"ada@example.com","name":"Ada"},"app":{"id":"cli_9","name":"Claude Desktop"},"project":"shop","role":"editor","scopes":["mcp:read","mcp:write"],"identityToken":"eyJ.x.y"}}
-- agent --
{"type":"result","id":"c-1"}
-- gateway --
{"type":"call","id":"c-2","kind":"resource","name":"test://me","caller":{"keyId":"key_42","keyName":"ci","project":"shop","scopes":["mcp:read"]}}
-- agent --
{"type":"result","id":"c-2"}
`));
    assert.deepEqual(seen, {
      'c-1': {
        caller: { keyId: 'key_77', keyName: 'Claude Desktop' },
        person: { id: 'usr_1', email: 'ada@example.com', name: 'Ada' },
        app: { id: 'cli_9', name: 'Claude Desktop' },
        project: 'shop', role: 'editor', scopes: ['mcp:read', 'mcp:write'], identityToken: 'eyJ.x.y',
      },
      'c-2': {
        caller: { keyId: 'key_42', keyName: 'ci' },
        person: undefined, app: undefined, project: 'shop', role: '', scopes: ['mcp:read'], identityToken: '',
      },
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
