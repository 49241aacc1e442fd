package agentproto

// KindRequest is the kind of a call that carries a custom MCP request to the
// MCP server behind a bridged agent ([Registration.Bridge]): Name is the
// JSON-RPC method, one the MCP specification does not define (the
// interceptors extension's "interceptors/list" and "interceptor/invoke",
// which a project's policy sends to an interceptor server it names by its
// agent), and Args its params, a JSON object. The bridge sends the request
// on its session with the server and answers with a result whose Result is
// the server's JSON-RPC result as it came, or with an error: the server's
// JSON-RPC error as Code, Message and Data, or, with no Code, why the
// request could not be sent.
//
// Only a bridged agent takes such calls; another agent, or an older bridge,
// answers them with an error ("This agent has no request …"). The gateway
// sends them to bridged agents only, and never on a client's behalf.
const KindRequest = "request"
