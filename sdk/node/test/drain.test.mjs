// close(): the drain, played against the transcript player (player.mjs).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Agent, defineTool } from '../dist/index.js';
import { waitFor } from './harness.mjs';
import { connected, exactly, gate, script, setup, sleep } from './player.mjs';

/**
 * registerStuck registers the tool `stuck`, which waits for its signal to
 * abort; the returned state says whether it started and why it was aborted.
 */
function registerStuck(agent) {
  const st = { started: false, reason: undefined };
  agent.register(
    defineTool({
      name: 'stuck', description: 'd', inputSchema: { type: 'object' },
      handler: async (_args, call) => {
        st.started = true;
        await new Promise((r) => call.signal.addEventListener('abort', r));
        st.reason = call.signal.reason;
        return 'late';
      },
    }),
  );
  return st;
}

describe('close: drain', () => {
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
    const stuck = registerStuck(agent);
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
        await waitFor(() => stuck.started, { what: 'the handler to start' });
        const t0 = Date.now();
        await agent.close();
        const took = Date.now() - t0;
        assert.ok(took >= 290 && took < 1500, `close took ${took} ms`);
        assert.equal(stuck.reason?.message, 'The agent is closing.');
      },
    });
    assert.ok(
      logger.lines.some((l) => l.level === 'warn' && l.msg === 'spacefix: 1 call was still running 0.3 s after the drain; aborting it'),
      JSON.stringify(logger.lines),
    );
  });

  it('stops waiting when the gateway drops the connection during the drain', async (t) => {
    const { gw, agent } = await setup(t);
    const stuck = registerStuck(agent);
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
        await waitFor(() => stuck.started, { what: 'the handler to start' });
        t0 = Date.now();
        closing = agent.close();
      },
      closed: async () => {
        await closing;
        assert.ok(Date.now() - t0 < 2000, `close took ${Date.now() - t0} ms`);
        assert.ok(stuck.reason, 'the call was aborted');
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
