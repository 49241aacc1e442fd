// The complete example from the guide "Building tools", unchanged apart from
// the import of orderService, which stands for the service code you already
// have (here: ./order-service.mjs). Run it with
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
  handler: ({ requestId, ...input }) => orderService.createOnce(requestId, input)
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
agent.register([getOrder, searchOrders, createOrder, openOrders, summariseOrder]);
void agent.connect();
