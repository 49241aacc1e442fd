// End-to-end: the agent survives the gateway going away and coming back.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { defineTool } from '../dist/index.js';
import { Gateway, startAgent, textOf, waitFor } from './harness.mjs';

describe('reconnecting', () => {
  let gw;
  let agent;
  let logs;
  const inFlight = { started: false, reason: undefined };

  before(async () => {
    gw = await Gateway.start();
    ({ agent, logs } = await startAgent(gw, [
      defineTool({ name: 'ping_me', description: 'd', inputSchema: { type: 'object' }, handler: () => 'pong' }),
      defineTool({
        name: 'hang',
        description: 'd',
        inputSchema: { type: 'object' },
        handler: async (_args, call) => {
          inFlight.started = true;
          await new Promise((r) => call.signal.addEventListener('abort', r));
          inFlight.reason = call.signal.reason;
          return 'late';
        },
      }),
    ]));
  });

  after(async () => {
    await agent?.close();
    await gw?.dispose();
  });

  /** callWhenBack calls ping_me with a new client until the agent is back. */
  const callWhenBack = () =>
    waitFor(
      async () => {
        const c = await gw.client();
        try {
          const r = await c.callTool({ name: 'ping_me', arguments: {} });
          return !r.isError && textOf(r) === 'pong';
        } finally {
          await c.close();
        }
      },
      { ms: 15_000, every: 100, what: 'ping_me to answer through the restarted gateway' },
    );

  it('reconnects after the gateway restarts', async () => {
    const c = await gw.client();
    assert.equal(textOf(await c.callTool({ name: 'ping_me', arguments: {} })), 'pong');
    await c.close();
    await gw.restart();
    assert.ok(
      logs.some((l) => l.level === 'info' && /^spacefix: the gateway is going away \(reconnecting in 0\.[23] s\): gateway shutting down$/.test(l.msg)),
      JSON.stringify(logs),
    );
    await callWhenBack();
    assert.equal(agent.connected, true);
  });

  it('keeps retrying with growing backoff while the gateway is down, and connects when it is back', async () => {
    const mark = logs.length;
    await gw.stop();
    // Attempt 2 may reach the gateway while it is still closing ("other
    // side closed") or find its port shut (ECONNREFUSED): either way it is
    // a failed attempt, and the backoff grows the same.
    const tries = () =>
      logs.slice(mark).filter((l) => l.level === 'warn' && /^spacefix: cannot connect to the gateway \(retrying in .*\): register: /.test(l.msg));
    await waitFor(() => tries().filter((l) => /ECONNREFUSED 127\.0\.0\.1:\d+$/.test(l.msg)).length >= 2, { what: 'two refused attempts' });
    const delay = {};
    for (const l of tries()) {
      const m = /\(retrying in ([\d.]+) s, attempt (\d+)\)/.exec(l.msg);
      if (m) delay[m[2]] = Number(m[1]);
    }
    // After the goodbye (attempt 1): about 500 ms, then about 1 s.
    const since = JSON.stringify(logs.slice(mark));
    assert.ok(delay[2] >= 0.4 && delay[2] <= 0.6, since);
    assert.ok(delay[3] >= 0.8 && delay[3] <= 1.2, since);
    assert.equal(agent.connected, false);
    await gw.start();
    await callWhenBack();
    assert.equal(agent.connected, true);
  });

  it('cancels a call in flight with reason shutdown when the gateway stops', async () => {
    const c = await gw.client();
    const pending = c.callTool({ name: 'hang', arguments: {} }).then(
      (r) => r,
      (err) => err,
    );
    await waitFor(() => inFlight.started, { what: 'the handler to start' });
    gw.proc.kill('SIGTERM');
    try {
      await waitFor(() => inFlight.reason, { ms: 4000, what: 'the signal to abort within the 1 s grace' });
      assert.equal(inFlight.reason.message, 'The gateway is shutting down and stopped the call.');
      assert.deepEqual(await pending, {
        content: [{ type: 'text', text: 'The gateway is shutting down and stopped this call. Try again in a moment.' }],
        isError: true,
      });
    } finally {
      await gw.stop();
      await c.close().catch(() => {});
    }
  });
});
