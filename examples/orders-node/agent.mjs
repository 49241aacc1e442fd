// The example of sdk/node/README.md, unchanged apart from
// the import of orderService, which stands for the service code you already
// have (here: ./order-service.mjs), and sales_report, the slow tool of
// docs/tasks.md. Run it with
//   SPACEFIX_API_KEY=sfx_agent_… SPACEFIX_URL=http://127.0.0.1:8080 node agent.mjs
import { Agent, defineTool, defineResource, definePrompt } from '@spacefix/core';
import { z } from 'zod';
import { orderService } from './order-service.mjs';

const getOrder = defineTool({
  name: 'get_order',
  description:
    'Look up one order by its id. Returns the order, or an error if no order has that id. ' +
    'To find orders by customer, use search_orders instead.',
  inputSchema: z.object({ id: z.string().describe('The order id, for example "1042"') }),
  annotations: { readOnlyHint: true },
  handler: async ({ id }) => {
    const order = await orderService.findById(id);
    if (!order) throw new Error(`No order with id ${id}. Ask the user to confirm the id, or use search_orders.`);
    return order;
  }
});

const searchOrders = defineTool({
  name: 'search_orders',
  description: 'List orders for a customer, newest first. Returns an empty list when nothing matches.',
  inputSchema: z.object({
    customer: z.string().describe('Customer handle, for example "ada"'),
    status: z.enum(['open', 'shipped', 'cancelled']).optional().describe('Only orders in this status'),
    limit: z.number().int().min(1).max(50).default(10).describe('How many orders to return (1 to 50)')
  }),
  annotations: { readOnlyHint: true },
  handler: ({ customer, status, limit = 10 }) => orderService.search({ customer, status, limit })
});

const createOrder = defineTool({
  name: 'create_order',
  description: 'Create an order. Always pass the same requestId when retrying, so the order is created only once.',
  inputSchema: z.object({
    requestId: z.string().describe('A unique id for this attempt, for example a UUID. Reuse it when retrying.'),
    customer: z.string(),
    total: z.number().int().describe('Total in cents')
  }),
  annotations: { idempotentHint: true },
  // The gateway makes create_order safe to repeat: a repeat of one requestId
  // gets the first call's result without reaching this handler. The one
  // repeat it delivers again is one after an unknown outcome (the earlier
  // call timed out, or this agent went away before answering), so the order
  // may exist already.
  idempotencyKey: 'requestId',
  handler: async ({ requestId, ...input }, call) => {
    if (call.retryOf) {
      const earlier = await orderService.findByRequest(requestId);
      if (earlier) return earlier;
    }
    return orderService.create(requestId, input);
  }
});

// The slow tool: a report that takes about 45 seconds (ORDERS_REPORT_SECONDS makes
// it shorter, for the example's test). It declares task support, so the
// gateway runs it as a task: a client that speaks MCP tasks gets a task to
// poll, and any other client gets, at the project's call wait, a job id for
// the gateway's spacefix_job tool. Its progress lines become the task's
// status message; a cancelled task aborts call.signal.
const reportSeconds = Number(process.env.ORDERS_REPORT_SECONDS ?? 45);
const salesReport = defineTool({
  name: 'sales_report',
  description: 'Build the sales report: how many orders, their total and the count per status. Slow: it takes about 45 seconds.',
  inputSchema: z.object({
    status: z.enum(['open', 'shipped', 'cancelled']).optional().describe('Only orders in this status')
  }),
  annotations: { readOnlyHint: true },
  execution: { taskSupport: 'optional' },
  handler: async ({ status }, call) => {
    const steps = 9;
    for (let step = 1; step <= steps; step++) {
      // Stands for the slow part: a query over a year of orders.
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, (reportSeconds * 1000) / steps);
        call.signal.addEventListener('abort', () => { clearTimeout(timer); reject(call.signal.reason); }, { once: true });
      });
      call.progress(`Counted ${Math.floor((step * 12) / steps)} of 12 months`);
    }
    const orders = (await orderService.all()).filter((o) => status === undefined || o.status === status);
    const byStatus = {};
    for (const o of orders) byStatus[o.status] = (byStatus[o.status] ?? 0) + 1;
    return { orders: orders.length, total: orders.reduce((sum, o) => sum + o.total, 0), byStatus };
  }
});

const openOrders = defineResource({
  uri: 'orders://open',
  name: 'Open orders',
  description: 'Every order that has not shipped yet',
  mimeType: 'application/json',
  handler: async () => (await orderService.all()).filter(o => o.status === 'open')
});

const summariseOrder = definePrompt({
  name: 'summarise_order',
  title: 'Summarise an order',
  description: 'Write a short, polite summary of an order for a support reply.',
  argsSchema: z.object({ id: z.string().describe('The order id') }),
  handler: async ({ id }) =>
    `Summarise this order politely, in two sentences:\n${JSON.stringify(await orderService.findById(id))}`
});

const agent = new Agent({ apiKey: process.env.SPACEFIX_API_KEY, name: 'orders' });
agent.register([getOrder, searchOrders, createOrder, salesReport, openOrders, summariseOrder]);
void agent.connect();
