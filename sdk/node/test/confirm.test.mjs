// call.confirm, played against the transcript player (player.mjs).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CannotConfirmError, defineTool, isCannotConfirm } from '../dist/index.js';
import { waitFor } from './harness.mjs';
import { connected, exactly, script, setup } from './player.mjs';

describe('call.confirm', () => {
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
