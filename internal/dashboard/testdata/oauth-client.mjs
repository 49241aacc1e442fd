// An MCP client that signs in to the gateway with OAuth, written only
// against the official TypeScript SDK (@modelcontextprotocol/sdk 1.x), as a
// connector would: 401 → discovery → registration (dynamic, or a Client ID
// Metadata Document URL) → the person's consent in a browser → PKCE code →
// tokens → tools. browser_oauth_test.go drives the browser.
//
// Usage: node oauth-client.mjs SDK_DIR MCP_URL [CIMD_URL]
// Lines on stdout: AUTHORIZE <url> (open it), then TOOLS, CALL, REFRESHED,
// DONE; after DONE it waits for a line "again" on stdin and connects once
// more: a disconnected app's refresh is refused (invalid_grant), so the SDK
// starts a new sign-in and prints REAUTH <url>, then REFUSED true.
import http from 'node:http';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

const [sdkDir, mcpURL, cimdURL] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(`${sdkDir}/dist/esm/${p}`).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { auth, UnauthorizedError } = await sdk('client/auth.js');

// The redirect lands here, on a loopback port of our own (RFC 8252).
let gotCode;
const codeP = new Promise((resolve) => { gotCode = resolve; });
const callback = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://127.0.0.1');
  res.end('You can close this window.');
  gotCode({ code: u.searchParams.get('code'), error: u.searchParams.get('error'), iss: u.searchParams.get('iss'), state: u.searchParams.get('state') });
});
await new Promise((r) => callback.listen(0, '127.0.0.1', r));
const redirectUrl = `http://127.0.0.1:${callback.address().port}/callback`;

let authorizeSeen = 0;
const store = {};
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return {
      client_name: 'ts-sdk-app', redirect_uris: [redirectUrl], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none',
    };
  },
  clientMetadataUrl: cimdURL || undefined,
  state() { return 'ts-state-1'; },
  clientInformation() { return store.client; },
  saveClientInformation(c) { store.client = c; },
  tokens() { return store.tokens; },
  saveTokens(t) { store.tokens = t; },
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'tokens') delete store.tokens;
    if (scope === 'all') delete store.client;
  },
  saveCodeVerifier(v) { store.verifier = v; },
  codeVerifier() { return store.verifier; },
  redirectToAuthorization(url) {
    authorizeSeen++;
    console.log(`${authorizeSeen === 1 ? 'AUTHORIZE' : 'REAUTH'} ${url.href}`);
  },
};

function transport() {
  return new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider });
}

const client = new Client({ name: 'ts-oauth', version: '1' });
try {
  await client.connect(transport());
  throw new Error('connected without signing in');
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
const back = await codeP;
if (back.error) throw new Error(`authorization refused: ${back.error}`);
if (back.state !== 'ts-state-1' || !back.iss) throw new Error(`bad redirect: ${JSON.stringify(back)}`);
const t1 = transport();
await t1.finishAuth(back.code);
const c1 = new Client({ name: 'ts-oauth', version: '1' });
await c1.connect(t1);
const tools = await c1.listTools();
console.log('TOOLS ' + tools.tools.map((t) => t.name).sort().join(','));
const res = await c1.callTool({ name: 'get_order', arguments: { id: '1042' } });
console.log('CALL ' + JSON.stringify(res.content));
await c1.close();

// Refresh: the SDK trades the refresh token for new tokens (rotated).
const before = store.tokens;
const r = await auth(provider, { serverUrl: new URL(mcpURL) });
const rotated = r === 'AUTHORIZED' && store.tokens.access_token !== before.access_token && store.tokens.refresh_token !== before.refresh_token;
const c2 = new Client({ name: 'ts-oauth', version: '1' });
await c2.connect(transport());
const again = await c2.listTools();
await c2.close();
console.log(`REFRESHED ${rotated} ${again.tools.length}`);
console.log('DONE');

// Wait for the person to disconnect the app in the dashboard.
const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (line.trim() !== 'again') continue;
  try {
    const c3 = new Client({ name: 'ts-oauth', version: '1' });
    await c3.connect(transport());
    console.log('STILL-CONNECTED');
  } catch (e) {
    console.log(`REFUSED ${e instanceof UnauthorizedError}`);
  }
  break;
}
callback.close();
process.exit(0);
