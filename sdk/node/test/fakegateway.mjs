// A scripted peer that speaks the gateway's side of the agent protocol, for
// unit tests of what the SDK does on the wire (heartbeats, deadlines, late
// results). End-to-end behaviour is tested against the real gateway.
import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';

import { waitFor } from './harness.mjs';

export async function fakeGateway({ autoPong = true, heartbeatMs = 5000, refuse } = {}) {
  const registrations = [];
  const messages = [];
  const sockets = [];
  const server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/agent/register') {
      res.writeHead(404).end('not found');
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      registrations.push({ auth: req.headers.authorization, body: JSON.parse(body) });
      if (refuse) {
        res.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8' }).end(refuse + '\n');
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ ticket: `t${registrations.length}`, expiresInMs: 30000 }));
    });
  });
  const wss = new WebSocketServer({ noServer: true, autoPong });
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.push(ws);
      ws.on('message', (d) => messages.push(JSON.parse(d.toString())));
      ws.send(
        JSON.stringify({
          type: 'welcome',
          welcome: { protocol: 1, replica: `r-${sockets.length}`, project: 'default', agent: 'key_1', callWaitMs: 30000, heartbeatMs },
        }),
      );
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    registrations,
    messages,
    sockets,
    /** The socket of the latest connection. */
    get ws() {
      return sockets.at(-1);
    },
    send(m) {
      sockets.at(-1).send(JSON.stringify(m));
    },
    /** waitMessage waits for a message from the agent that matches pred. */
    waitMessage(pred, what = 'a message from the agent') {
      return waitFor(() => messages.find(pred), { ms: 5000, what });
    },
    async close() {
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
