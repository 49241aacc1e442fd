// Compile-time checks of what a handler's arguments are inferred as. Run by
// `npm run typecheck` (part of `npm test`); nothing here executes.
import { z } from 'zod';
import { type } from 'arktype';
import { Agent, CannotConfirmError, defineTool, definePrompt, defineResource, isCannotConfirm, ProtocolError, toolError, type Call, type ElicitResult } from '../dist/index.js';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(_: T): void {}

// Zod 4: the input type, so a field with .default() is optional.
defineTool({
  name: 'search_orders',
  description: 'd',
  inputSchema: z.object({
    customer: z.string(),
    status: z.enum(['open', 'shipped', 'cancelled']).optional(),
    limit: z.number().int().min(1).max(50).default(10),
  }),
  handler: (args, call) => {
    assertType<Equal<typeof args.customer, string>>(true);
    assertType<Equal<typeof args.status, 'open' | 'shipped' | 'cancelled' | undefined>>(true);
    assertType<Equal<typeof args.limit, number | undefined>>(true);
    assertType<Equal<typeof call, Call>>(true);
    // @ts-expect-error not a field of the schema
    args.nope;
    return null;
  },
});

// A transform: the handler gets the input, not the output.
defineTool({
  name: 't',
  description: 'd',
  inputSchema: z.object({ n: z.string().transform((s) => s.length) }),
  handler: ({ n }) => {
    assertType<Equal<typeof n, string>>(true);
  },
});

// ArkType, through Standard Schema.
defineTool({
  name: 'ark',
  description: 'd',
  inputSchema: type({ id: 'string', 'count?': 'number' }),
  handler: (args) => {
    assertType<Equal<typeof args.id, string>>(true);
    assertType<Equal<typeof args.count, number | undefined>>(true);
  },
});

// Plain JSON Schema written inline: read for its properties.
defineTool({
  name: 'plain',
  description: 'd',
  inputSchema: {
    type: 'object',
    properties: {
      id: { type: 'string' },
      limit: { type: 'integer' },
      status: { enum: ['open', 'shipped'] },
      tags: { type: 'array', items: { type: 'string' } },
    },
    required: ['id'],
  },
  handler: (args) => {
    assertType<Equal<typeof args.id, string>>(true);
    assertType<Equal<typeof args.limit, number | undefined>>(true);
    assertType<Equal<typeof args.status, 'open' | 'shipped' | undefined>>(true);
    assertType<Equal<typeof args.tags, string[] | undefined>>(true);
  },
});

// A JSON Schema held in a variable without `as const`: a record.
const loose: { type: string; properties: Record<string, unknown> } = { type: 'object', properties: {} };
defineTool({
  name: 'loose',
  description: 'd',
  inputSchema: loose,
  handler: (args) => {
    assertType<Equal<typeof args, Record<string, unknown>>>(true);
  },
});

// Prompts: string arguments from the schema.
definePrompt({
  name: 'summarise_order',
  title: 'Summarise an order',
  description: 'd',
  argsSchema: z.object({ id: z.string(), tone: z.string().optional() }),
  handler: ({ id, tone }) => {
    assertType<Equal<typeof id, string>>(true);
    assertType<Equal<typeof tone, string | undefined>>(true);
    return { messages: [{ role: 'user', content: id }] };
  },
});

defineResource({ uri: 'orders://open', name: 'Open orders', handler: (call) => call.signal.aborted });

// call.confirm resolves with the user's answer; CannotConfirmError narrows.
defineTool({
  name: 'delete_order',
  description: 'd',
  inputSchema: z.object({ id: z.string() }),
  handler: async ({ id }, call) => {
    const ok = call.confirm(`Delete order ${id}?`);
    assertType<Equal<typeof ok, Promise<boolean>>>(true);
    try {
      return (await ok) ? 'deleted' : 'kept';
    } catch (err) {
      if (isCannotConfirm(err)) {
        assertType<Equal<typeof err, CannotConfirmError>>(true);
        const reason: string = err.reason;
        return reason;
      }
      throw err;
    }
  },
});

const agent = new Agent({ apiKey: 'k', namespace: true, name: 'orders', instance: 'eu-1', logger: console, drainTimeoutMs: 5000 });
const closed: Promise<void> = agent.close();
void closed;
agent.register([defineTool({ name: 'x', description: 'd', inputSchema: { type: 'object' }, handler: () => toolError('no') })]);
const p: Promise<void> = agent.connect();
void p;
void agent.setEnabled('x', false);

// A prompt without argsSchema gets string arguments.
definePrompt({
  name: 'no_args',
  handler: (args) => {
    assertType<Equal<typeof args, Record<string, string>>>(true);
    return 'x';
  },
});

// Task support is one of three words; a ProtocolError takes a code, a
// message and any data; together takes several forms.
defineTool({ name: 'report', description: 'd', inputSchema: { type: 'object' }, execution: { taskSupport: 'optional' }, handler: () => 'ok' });
// @ts-expect-error not a task support
defineTool({ name: 'odd', description: 'd', inputSchema: { type: 'object' }, execution: { taskSupport: 'sometimes' }, handler: () => 'ok' });
defineTool({
  name: 'book',
  description: 'd',
  inputSchema: { type: 'object' },
  handler: async (_args, call) => {
    const a = await call.together({ elicits: [{ message: 'Name?', schema: { type: 'object' } }] });
    assertType<Equal<typeof a.elicits, ElicitResult[] | undefined>>(true);
    throw new ProtocolError(-32602, 'bad dates', { field: 'from' });
  },
});

// idempotencyKey names a required string argument of the schema.
const orderInput = z.object({ requestId: z.string(), note: z.string().optional(), total: z.number() });
defineTool({ name: 'create_order', description: 'd', inputSchema: orderInput, idempotencyKey: 'requestId', handler: () => null });
// @ts-expect-error not a string
defineTool({ name: 'create_order', description: 'd', inputSchema: orderInput, idempotencyKey: 'total', handler: () => null });
// @ts-expect-error not required
defineTool({ name: 'create_order', description: 'd', inputSchema: orderInput, idempotencyKey: 'note', handler: () => null });
// @ts-expect-error no such argument
defineTool({ name: 'create_order', description: 'd', inputSchema: orderInput, idempotencyKey: 'request_id', handler: () => null });
// A schema whose arguments the type does not list: any name (checked at definition).
defineTool({ name: 'create_order', description: 'd', inputSchema: loose, idempotencyKey: 'requestId', handler: () => null });
defineTool({
  name: 'create_order',
  description: 'd',
  inputSchema: orderInput,
  idempotencyKey: 'requestId',
  handler: (_args, call) => {
    assertType<Equal<typeof call.retryOf, string>>(true);
    assertType<Equal<typeof call.retryReason, '' | 'timeout' | 'disconnected'>>(true);
  },
});
