// Issue 25, "Declaring it", on the wire: a tool's task support in the
// registration, a handler's ProtocolError, several forms in one round.
// Played against the transcript player; through the real gateway in
// gateway.test.mjs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { defineResource, defineTool, ProtocolError } from '../dist/index.js';
import { connected, exactly, script, setup, stopped } from './player.mjs';

const obj = { type: 'object' };

describe('task support', () => {
  it('registers execution.taskSupport for optional and required tools only', async (t) => {
    const { gw, agent } = await setup(t);
    const handler = () => 'done';
    agent.register([
      defineTool({ name: 'report', description: 'd', inputSchema: obj, execution: { taskSupport: 'optional' }, handler }),
      defineTool({ name: 'export', description: 'd', inputSchema: obj, execution: { taskSupport: 'required' }, handler }),
      defineTool({ name: 'plain', description: 'd', inputSchema: obj, execution: { taskSupport: 'forbidden' }, handler }),
      defineTool({ name: 'quick', description: 'd', inputSchema: obj, handler }),
    ]);
    await gw.play(agent, script(connected + stopped), { connected: () => agent.connect() });
    assert.deepEqual(
      gw.registrations[0].body.tools.map((tl) => [tl.name, tl.execution]),
      [['report', { taskSupport: 'optional' }], ['export', { taskSupport: 'required' }], ['plain', undefined], ['quick', undefined]],
    );
  });

  it('refuses a task support that is none of the three', () => {
    assert.throws(
      () => defineTool({ name: 'odd', description: 'd', inputSchema: obj, execution: { taskSupport: 'sometimes' }, handler: () => 1 }),
      { name: 'TypeError', message: `defineTool "odd": execution.taskSupport must be 'forbidden', 'optional' or 'required', not "sometimes"` },
    );
  });
});

describe('protocol errors', () => {
  it('sends a thrown ProtocolError with its code and data; an Error without a code', async (t) => {
    const { gw, agent } = await setup(t);
    agent.register([
      defineTool({ name: 'book', description: 'd', inputSchema: obj, handler: () => { throw new ProtocolError(-32602, 'bad dates', { field: 'from' }); } }),
      defineTool({ name: 'zero', description: 'd', inputSchema: obj, handler: async () => { throw new ProtocolError(0, 'no code'); } }),
      defineResource({ uri: 'orders://archive', name: 'Archive', handler: () => { throw new ProtocolError(4001, 'the archive moved'); } }),
      defineTool({ name: 'plain', description: 'd', inputSchema: obj, handler: () => { throw new Error('no such order'); } }),
    ]);
    await gw.play(agent, [
      ...script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"book","args":{}}
-- agent --
{"type":"error","id":"c-1","message":"bad dates","code":-32602,"data":{"field":"from"}}
-- gateway --
{"type":"call","id":"c-2","kind":"tool","name":"zero","args":{}}
-- agent --
{"type":"error","id":"c-2","message":"no code","code":-32603}
-- gateway --
{"type":"call","id":"c-3","kind":"resource","name":"orders://archive","args":{}}
-- agent --
{"type":"error","id":"c-3","message":"the archive moved","code":4001}
-- gateway --
{"type":"call","id":"c-4","kind":"tool","name":"plain","args":{}}
`),
      exactly({ type: 'error', id: 'c-4', message: 'no such order' }),
    ]);
  });

  it('refuses a code that is not a whole number', () => {
    assert.throws(() => new ProtocolError('x', 'm'), { name: 'TypeError', message: 'ProtocolError: code must be a whole number, not "x"' });
  });
});

describe('together', () => {
  it('asks several forms in one ask and resolves with their answers in order', async (t) => {
    const { gw, agent } = await setup(t);
    let answers;
    agent.register([
      defineTool({
        name: 'plan', description: 'd', inputSchema: obj,
        handler: async (_args, call) => {
          answers = await call.together({ elicits: [{ message: 'Your name?', schema: obj }, { message: 'Your city?', schema: obj, id: 'city' }] });
          return 'ok';
        },
      }),
    ]);
    await gw.play(agent, script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"plan","args":{}}
-- agent --
{"type":"ask","id":"c-1","requests":{"in-1-elicit-1":{"method":"elicitation/create","params":{"mode":"form","message":"Your name?"}},"city":{"method":"elicitation/create","params":{"message":"Your city?"}}}}
-- gateway --
{"type":"answered","id":"c-1","responses":{"in-1-elicit-1":{"action":"accept","content":{"name":"Ada"}},"city":{"action":"decline"}}}
-- agent --
{"type":"result","id":"c-1","result":{"content":[{"type":"text","text":"ok"}]}}
`));
    assert.deepEqual(answers, { elicits: [{ action: 'accept', content: { name: 'Ada' } }, { action: 'decline' }] });
  });

  it('refuses repeated ids and more than 8 requests', async (t) => {
    const { gw, agent } = await setup(t);
    const errors = [];
    agent.register([
      defineTool({
        name: 'bad', description: 'd', inputSchema: obj,
        handler: async (_args, call) => {
          for (const inputs of [
            { elicit: { message: 'a', schema: obj }, ids: { elicit: 'x' }, elicits: [{ message: 'b', schema: obj, id: 'x' }] },
            { elicits: Array.from({ length: 9 }, () => ({ message: 'm', schema: obj })) },
          ]) {
            await call.together(inputs).catch((e) => errors.push(e.message));
          }
          return 'ok';
        },
      }),
    ]);
    await gw.play(agent, script(connected + `
-- gateway --
{"type":"call","id":"c-1","kind":"tool","name":"bad","args":{}}
-- agent --
{"type":"result","id":"c-1"}
`));
    assert.deepEqual(errors, [
      'call.together: input request id "x" is given twice; each request needs its own',
      'call.together: 9 input requests; at most 8 go in one round',
    ]);
  });
});
