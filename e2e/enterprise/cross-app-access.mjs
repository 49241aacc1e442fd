// cross-app-access.mjs signs a person in to the gateway with the official
// TypeScript SDK's CrossAppAccessProvider (enterprise-managed
// authorization): on the gateway's 401 it discovers the authorization
// server, exchanges the person's ID token at the company's IdP for an
// ID-JAG (RFC 8693), presents it with the JWT bearer grant, and calls the
// whoami tool. With dpop=1 the provider holds a DPoP session, so the
// token is DPoP-bound and every request carries a proof.
//
// Usage: node cross-app-access.mjs MCP_URL ISSUER IDP_TOKEN_URL ID_TOKEN IDP_CLIENT CLIENT_ID CLIENT_SECRET DPOP
// Prints one JSON line per event on stdout.
import {
  Client,
  CrossAppAccessProvider,
  DpopSession,
  StreamableHTTPClientTransport,
  requestJwtAuthorizationGrant,
} from '@modelcontextprotocol/client';

const [mcpURL, issuer, idpTokenURL, idToken, idpClient, clientId, clientSecret, dpop] = process.argv.slice(2);
const say = (event) => console.log(JSON.stringify(event));

class Provider extends CrossAppAccessProvider {
  constructor(options, session) {
    super(options);
    this._session = session;
  }
  dpop() {
    return this._session;
  }
}

const session = dpop === '1' ? await DpopSession.create() : undefined;
const provider = new Provider(
  {
    assertion: async (ctx) => {
      say({ event: 'assertion', authorizationServer: ctx.authorizationServerUrl, resource: String(ctx.resourceUrl), scope: ctx.scope ?? '' });
      const grant = await requestJwtAuthorizationGrant({
        tokenEndpoint: idpTokenURL,
        audience: ctx.authorizationServerUrl,
        resource: ctx.resourceUrl,
        idToken,
        clientId: idpClient,
        scope: ctx.scope,
        fetchFn: ctx.fetchFn,
      });
      return grant.jwtAuthGrant;
    },
    clientId,
    clientSecret,
    clientName: 'Wiki',
    expectedIssuer: issuer,
  },
  session,
);

const client = new Client({ name: 'e2e-cross-app-access', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider });
try {
  await client.connect(transport);
  const tokens = provider.tokens();
  say({ event: 'token', tokenType: tokens?.token_type ?? '', scope: tokens?.scope ?? '', refresh: Boolean(tokens?.refresh_token) });
  const res = await client.callTool({ name: 'whoami', arguments: {} });
  say({ event: 'whoami', text: res.content?.[0]?.text ?? '', isError: Boolean(res.isError) });
  if (session) say({ event: 'dpop', thumbprint: session.thumbprint });
} catch (err) {
  say({ event: 'error', message: String(err?.message ?? err) });
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
