// orderService stands for the service code you already have: the tools in
// agent.mjs are thin adapters over it. This one keeps a few sample orders in
// memory so the example runs on its own.

/** @typedef {{ id: string, customer: string, status: 'open' | 'shipped' | 'cancelled', total: number, createdAt: string, items: string[], requestId?: string }} Order */

/** @type {Order[]} */
const orders = [
  { id: '1039', customer: 'grace', status: 'cancelled', total: 1250, createdAt: '2025-11-28T09:12:00Z', items: ['notebook'] },
  { id: '1040', customer: 'ada', status: 'shipped', total: 4200, createdAt: '2025-11-29T14:03:00Z', items: ['keyboard'] },
  { id: '1041', customer: 'linus', status: 'open', total: 899, createdAt: '2025-11-30T08:45:00Z', items: ['usb cable'] },
  { id: '1042', customer: 'ada', status: 'open', total: 2599, createdAt: '2025-12-01T10:30:00Z', items: ['mouse', 'mouse pad'] },
];

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

  /**
   * Creates an order under requestId, kept with the order so that a retry
   * after an unknown outcome finds what the earlier attempt did. A real
   * service keeps it in its database, in the same transaction as the order
   * (a column with a unique constraint), so that it holds on every replica
   * and after a restart.
   */
  async create(requestId, { customer, total }) {
    /** @type {Order} */
    const order = { id: String(nextId++), customer, status: 'open', total, createdAt: new Date().toISOString(), items: [], requestId };
    orders.push(order);
    return order;
  },

  /** The order created under requestId, if any. */
  async findByRequest(requestId) {
    return orders.find((o) => o.requestId === requestId);
  },

  async all() {
    return [...orders];
  },
};
