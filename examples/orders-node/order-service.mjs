// orderService stands for the service code you already have: the tools in
// agent.mjs are thin adapters over it. This one keeps a few sample orders in
// memory so the example runs on its own.

/** @typedef {{ id: string, customer: string, status: 'open' | 'shipped' | 'cancelled', total: number, createdAt: string, items: string[] }} Order */

/** @type {Order[]} */
const orders = [
  { id: '1039', customer: 'grace', status: 'cancelled', total: 1250, createdAt: '2025-11-28T09:12:00Z', items: ['notebook'] },
  { id: '1040', customer: 'ada', status: 'shipped', total: 4200, createdAt: '2025-11-29T14:03:00Z', items: ['keyboard'] },
  { id: '1041', customer: 'linus', status: 'open', total: 899, createdAt: '2025-11-30T08:45:00Z', items: ['usb cable'] },
  { id: '1042', customer: 'ada', status: 'open', total: 2599, createdAt: '2025-12-01T10:30:00Z', items: ['mouse', 'mouse pad'] },
];

// The orders created so far, by the requestId of the call that created them.
// A real service keeps this record in its database (for example a table with
// a unique constraint on the request id), so that a retry that lands on
// another replica, or after a restart, still finds it. Memory is enough for
// an example with one process.
/** @type {Map<string, Order>} */
const createdByRequest = new Map();

let nextId = 1043;

export const orderService = {
  /** @param {string} id @returns {Promise<Order | undefined>} */
  async findById(id) {
    return orders.find((o) => o.id === id);
  },

  /** Orders of a customer, newest first. */
  async search({ customer, status, limit = 10 }) {
    return orders
      .filter((o) => o.customer === customer && (status === undefined || o.status === status))
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
      .slice(0, limit);
  },

  /** Creates an order once per requestId; a repeat returns the order created the first time. */
  async createOnce(requestId, { customer, total }) {
    const seen = createdByRequest.get(requestId);
    if (seen) return seen;
    /** @type {Order} */
    const order = { id: String(nextId++), customer, status: 'open', total, createdAt: new Date().toISOString(), items: [] };
    orders.push(order);
    createdByRequest.set(requestId, order);
    return order;
  },

  async all() {
    return [...orders];
  },
};
