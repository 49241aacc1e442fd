// Package bridge turns an existing MCP server into a Spacefix agent: the
// command behind `spacefix bridge`.
//
// A [Bridge] runs one MCP server — a child process spoken to over stdio, or
// a remote Streamable HTTP (or legacy SSE) endpoint — as a go-sdk client,
// and offers what the server lists to the gateway through the core SDK, as
// one agent connection. The server's tools and prompts are registered as
// <name>__<server's name>, its resources by their URIs. Calls go through
// both ways: arguments (already validated by the gateway against the
// server's own schema), progress, cancellation, and the result untouched
// (isError, images, audio, structuredContent).
//
// One generation is one core agent built from the server's lists; when the
// server says a list changed, the next generation registers and the
// previous one drains once the gateway has welcomed its successor. When the
// server goes away (a child exits or stops answering pings, a remote is
// down), the generation ends and the server is started or dialled again
// with backoff.
//
// The bridge offers a remote server protocol 2026-07-28 and a stdio child
// 2025-11-25 unless [Server.Protocol] says otherwise. A 2026-07-28 server's
// input requests reach the call's client under the server's own ids, and
// its -32021 reaches the client as -32021; a 2025 server's requests on the
// session are relayed to the client of the one call waiting.
//
// A remote may act as each caller's own account there ([Server.PerPerson],
// [Server.TokenExchange]): the bridge then keeps one Streamable HTTP
// session with the server per person (at most 256, the least recently
// used idle one closed first, each closed after 10 idle minutes), whose
// requests carry that person's token only, and only to the server's
// origin. In connect mode the token is the one the gateway sends with the
// call (agentproto.Caller.UpstreamToken) and a 401 ends the call with
// agentproto.CodeUpstreamUnauthorized for the gateway to refresh it; in
// exchange mode the bridge exchanges the call's identity token for one
// (RFC 8693) and, on a 401, exchanges once more and retries once. The
// tools, resources and prompts are listed with the shared session (the
// `bridge login` sign-in, or in exchange mode a client_credentials token).
//
// Files: config.go (what to bridge, the mcpServers file), connect.go (the
// transports), bridge.go (the lifecycle), offer.go (the server's lists as
// a core agent), relay.go (one call through, and a 2025 server's requests),
// inputs.go (a 2026-07-28 server's input requests and -32021),
// perperson.go (per-person sessions), exchange.go (the token exchange),
// request.go (the gateway's custom requests: a project's interceptors).
package bridge
