// End-to-end: the orders example of the README
// (examples/orders-node), run as its own process against a real gateway.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';

import { Gateway, repoRoot, textOf, toolNames, waitFor } from './harness.mjs';

const exampleDir = join(repoRoot, 'examples', 'orders-node');

describe('examples/orders-node', () => {
  let gw;
  let client;
  let proc;
  let output = '';

  before(async () => {
    if (!existsSync(join(exampleDir, 'node_modules', 'zod'))) {
      await promisify(execFile)('npm', ['ci', '--no-audit', '--no-fund'], { cwd: exampleDir, timeout: 120_000 });
    }
    gw = await Gateway.start();
    const apiKey = await gw.newKey('agent');
    proc = spawn(process.execPath, ['--import', new URL('./use-this-sdk.mjs', import.meta.url).href, 'agent.mjs'], {
      cwd: exampleDir,
      // The slow tool's 45 s made 2 s, so its test runs in seconds.
      env: { ...process.env, SPACEFIX_API_KEY: apiKey, SPACEFIX_URL: gw.url, ORDERS_REPORT_SECONDS: '2' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout.setEncoding('utf8').on('data', (d) => (output += d));
    proc.stderr.setEncoding('utf8').on('data', (d) => (output += d));
    client = await gw.client();
    await waitFor(async () => output.includes('spacefix: connected to the gateway') && (await toolNames(client)).includes('get_order'), {
      what: "the example's tools",
    }).catch((err) => {
      throw new Error(`${err.message}; the example wrote: ${output}`);
    });
  });

  after(async () => {
    await client?.close();
    if (proc && proc.exitCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    }
    await gw?.dispose();
  });

  const call = (name, args) => client.callTool({ name, arguments: args });

  it('connects and offers its four tools with their schemas', async () => {
    assert.match(output, /spacefix: connected to the gateway \(project default, replica r-\w+, 4 tools, 1 resource, 1 prompt\)/);
    const { tools } = await client.listTools();
    // spacefix_job is the gateway's, for clients without tasks: sales_report may run as one.
    assert.deepEqual(tools.map((t) => t.name).sort(), ['create_order', 'get_order', 'sales_report', 'search_orders', 'spacefix_job']);
    assert.deepEqual(tools.find((t) => t.name === 'sales_report').execution, { taskSupport: 'optional' });
    const search = tools.find((t) => t.name === 'search_orders');
    assert.equal(search.description, 'List orders for a customer, newest first. Returns an empty list when nothing matches.');
    assert.deepEqual(search.inputSchema.required, ['customer']);
    assert.deepEqual(search.inputSchema.properties.limit, {
      type: 'integer', minimum: 1, maximum: 50, default: 10, description: 'How many orders to return (1 to 50)',
    });
    assert.deepEqual(tools.find((t) => t.name === 'get_order').inputSchema, {
      type: 'object',
      properties: { id: { type: 'string', description: 'The order id, for example "1042"' } },
      required: ['id'],
    });
  });

  it('declares the same annotations as the Go example (e2e/examples_test.go)', async () => {
    const { tools } = await client.listTools();
    // The hints that are on (a client may fill in the others as false).
    const on = (a) => Object.fromEntries(Object.entries(a ?? {}).filter(([, v]) => v === true));
    const annotations = Object.fromEntries(tools.map((t) => [t.name, on(t.annotations)]));
    assert.deepEqual(annotations, {
      get_order: { readOnlyHint: true },
      search_orders: { readOnlyHint: true },
      create_order: { idempotentHint: true },
      sales_report: { readOnlyHint: true },
      spacefix_job: { idempotentHint: true },
    });
  });

  it('get_order returns the order, or the error the guide shows', async () => {
    const order = JSON.parse(textOf(await call('get_order', { id: '1042' })));
    assert.equal(order.id, '1042');
    assert.equal(order.customer, 'ada');
    assert.deepEqual(await call('get_order', { id: '9999' }), {
      content: [{ type: 'text', text: 'No order with id 9999. Ask the user to confirm the id, or use search_orders.' }],
      isError: true,
    });
    assert.equal(
      textOf(await call('get_order', {})),
      "Input validation error: Invalid arguments for tool get_order: data must have required property 'id'",
    );
  });

  it('search_orders lists newest first, applies the handler default, and is validated', async () => {
    const orders = JSON.parse(textOf(await call('search_orders', { customer: 'ada' })));
    assert.deepEqual(orders.map((o) => o.id), ['1042', '1040']);
    assert.deepEqual(JSON.parse(textOf(await call('search_orders', { customer: 'ada', status: 'shipped' }))).map((o) => o.id), ['1040']);
    assert.deepEqual(JSON.parse(textOf(await call('search_orders', { customer: 'ada', limit: 1 }))).map((o) => o.id), ['1042']);
    assert.deepEqual(JSON.parse(textOf(await call('search_orders', { customer: 'nobody' }))), []);
    assert.equal(
      textOf(await call('search_orders', { customer: 'ada', limit: 51 })),
      'Input validation error: Invalid arguments for tool search_orders: data/limit must be <= 50',
    );
    assert.equal(
      textOf(await call('search_orders', { customer: 'ada', status: 'lost' })),
      'Input validation error: Invalid arguments for tool search_orders: data/status must be equal to one of the allowed values',
    );
  });

  it('create_order creates once per requestId: the gateway answers the repeat, and refuses the id with other arguments', async () => {
    const first = JSON.parse(textOf(await call('create_order', { requestId: 'req-1', customer: 'hedy', total: 1999 })));
    const again = JSON.parse(textOf(await call('create_order', { requestId: 'req-1', customer: 'hedy', total: 1999 })));
    assert.deepEqual(await call('create_order', { requestId: 'req-1', customer: 'hedy', total: 2000 }), {
      content: [{ type: 'text', text: 'requestId "req-1" was already used for create_order with other arguments.' }],
      isError: true,
    });
    const other = JSON.parse(textOf(await call('create_order', { requestId: 'req-2', customer: 'hedy', total: 500 })));
    assert.deepEqual(again, first);
    assert.notEqual(other.id, first.id);
    assert.equal(first.status, 'open');
    // The service's own record has no lookup on the way in: one order per id
    // because the handler ran once per id.
    const hers = JSON.parse(textOf(await call('search_orders', { customer: 'hedy' })));
    assert.deepEqual(hers.map((o) => o.id).sort(), [first.id, other.id].sort());
    assert.equal(
      textOf(await call('create_order', { requestId: 'req-3', customer: 'ada', total: 1.5 })),
      'Input validation error: Invalid arguments for tool create_order: data/total must be integer',
    );
  });

  it('sales_report answers a job reference at the call wait, and its report through spacefix_job', async () => {
    const { stdout } = await promisify(execFile)(gw.bin, ['tokens', 'create', '--data', gw.db, '--name', 'example test', '--json']);
    const token = JSON.parse(stdout).token;
    await promisify(execFile)(gw.bin, ['settings', 'set', '--url', gw.url, '--token', token, '--call-wait', '1']);
    try {
      const first = textOf(await call('sales_report', {}));
      const m = /^The tool is still running \(job (task_[a-z0-9]+)\)\. Call spacefix_job with \{"jobId": "task_[a-z0-9]+"\} to get its result; it is kept for 24 hours after the job ends\.$/.exec(first);
      assert.ok(m, `answer at the wait: ${first}`);
      let report;
      await waitFor(async () => {
        const text = textOf(await call('spacefix_job', { jobId: m[1] })); // waits up to the call wait itself
        if (text.startsWith(`Job ${m[1]} (sales_report) is still running`)) {
          assert.match(text, /so far: Counted \d+ of 12 months\./);
          return false;
        }
        report = JSON.parse(text);
        return true;
      }, { ms: 20_000, what: 'the report' });
      // The four sample orders and the two create_order made above.
      assert.deepEqual(report, { orders: 6, total: 11447, byStatus: { cancelled: 1, shipped: 1, open: 4 } });
    } finally {
      await promisify(execFile)(gw.bin, ['settings', 'set', '--url', gw.url, '--token', token, '--call-wait', '30']);
    }
  });

  it('offers orders://open and summarise_order', async () => {
    const { contents } = await client.readResource({ uri: 'orders://open' });
    assert.equal(contents[0].mimeType, 'application/json');
    const open = JSON.parse(contents[0].text);
    assert.ok(open.length >= 2);
    assert.ok(open.every((o) => o.status === 'open'));
    assert.ok(open.some((o) => o.id === '1042'));

    const { messages } = await client.getPrompt({ name: 'summarise_order', arguments: { id: '1042' } });
    assert.equal(messages.length, 1);
    assert.equal(messages[0].role, 'user');
    assert.match(messages[0].content.text, /^Summarise this order politely, in two sentences:\n\{"id":"1042","customer":"ada",/);
    await assert.rejects(client.getPrompt({ name: 'summarise_order', arguments: {} }), {
      message: "MCP error -32602: Invalid arguments for prompt summarise_order: data must have required property 'id'",
    });
  });
});
