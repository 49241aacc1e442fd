// The official TypeScript SDK 1.x client's experimental tasks API against
// a Spacefix gateway at protocol 2025-11-25, for e2e/tasks_session_test.go:
// create a task, poll it to its result, then start another and cancel it.
// Usage: node tasks-session.mjs MCP_URL CLIENT_KEY. It prints one JSON
// line per event; the Go test reads them (and releases the first task's
// handler when it reads "created").
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, key] = process.argv.slice(2);
const say = (o) => console.log(JSON.stringify(o));
const related = 'io.modelcontextprotocol/related-task';

const client = new Client({ name: 'ts-tasks', version: '1.0.0' }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
await client.connect(transport);
say({ event: 'initialized', protocolVersion: transport.protocolVersion, tasks: client.getServerCapabilities()?.tasks ?? null });

// Create, poll, result.
const stream = client.experimental.tasks.callToolStream(
  { name: 'report', arguments: { month: 'May' } }, CallToolResultSchema, { task: { ttl: 60000 } });
for await (const m of stream) {
  switch (m.type) {
    case 'taskCreated':
      say({ event: 'created', task: m.task });
      break;
    case 'taskStatus':
      say({ event: 'status', status: m.task.status });
      break;
    case 'result':
      say({ event: 'result', text: m.result.content.map((c) => c.text).join('\n'), related: m.result._meta?.[related]?.taskId ?? null });
      break;
    case 'error':
      say({ event: 'error', message: m.error.message });
      break;
  }
}

// Cancel: start a task that runs until cancelled, stop polling it, cancel it.
const held = client.experimental.tasks.callToolStream(
  { name: 'hold', arguments: {} }, CallToolResultSchema, { task: { ttl: 60000 } });
const first = await held.next();
const id = first.value.task.taskId;
await held.return();
const cancelled = await client.experimental.tasks.cancelTask(id);
say({ event: 'cancelled', taskId: cancelled.taskId, status: cancelled.status });
const after = await client.experimental.tasks.getTask(id);
say({ event: 'after', status: after.status });
const list = await client.experimental.tasks.listTasks();
say({ event: 'list', ids: list.tasks.map((t) => t.taskId) });
await client.close();
