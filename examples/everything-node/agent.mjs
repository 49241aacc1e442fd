// An agent that offers everything the official MCP conformance suite asks
// of a server, with @spacefix/core (see everything.mjs).
//
//   SPACEFIX_API_KEY=sfx_agent_… node examples/everything-node/agent.mjs
//
// SPACEFIX_SDK names another copy of the SDK to load (the repository's tests
// point it at a fresh build); absent means the installed @spacefix/core.
import { pathToFileURL } from 'node:url';

import { define, WATCHED } from './everything.mjs';

const sdk = await import(process.env.SPACEFIX_SDK ? pathToFileURL(process.env.SPACEFIX_SDK).href : '@spacefix/core');
const agent = new sdk.Agent({ name: 'everything' });
agent.register(define(sdk));
void agent.connect();
const tick = setInterval(() => agent.resourceChanged(WATCHED).catch(() => {}), 3000);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, async () => {
    clearInterval(tick);
    await agent.close();
    process.exit(0);
  });
}
