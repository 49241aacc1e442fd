// The official TypeScript SDK 1.x client calling, as users do (listTools,
// then callTool), a slow tool that declares an output schema, for
// e2e/jobs_clients_test.go: the call's wait ends with a job reference,
// which callTool must accept; then the job tool gives the tool's result.
// Usage: node job-reference.mjs MCP_URL CLIENT_KEY. It prints one JSON line
// per event, and calls the job tool once it reads a line on stdin (the Go
// test writes one when it has let the tool return).
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, key] = process.argv.slice(2);
const say = (o) => console.log(JSON.stringify(o));
const texts = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const rl = createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();

const client = new Client({ name: 'ts-jobs', version: '1.0.0' }, { capabilities: {} });
await client.connect(new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
}));
const { tools } = await client.listTools();
say({ event: 'listed', outputSchema: tools.some((t) => t.name === 'sales_report' && t.outputSchema) });
let ref;
try {
  ref = await client.callTool({ name: 'sales_report', arguments: { month: 'May' } });
  say({ event: 'reference', isError: ref.isError ?? false, text: texts(ref) });
} catch (e) {
  say({ event: 'error', message: String(e?.message ?? e) });
  await client.close();
  rl.close();
  process.exit(0);
}
await lines.next(); // the tool has been let go
const jobId = /job (task_[a-z0-9]+)\)/.exec(texts(ref))?.[1] ?? '';
const res = await client.callTool({ name: 'spacefix_job', arguments: { jobId } });
say({ event: 'result', isError: res.isError ?? false, text: texts(res), structured: res.structuredContent ?? null });
await client.close();
rl.close();
