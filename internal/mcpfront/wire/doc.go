// Package wire is the MCP endpoint's reading and writing of JSON-RPC over
// Streamable HTTP, below everything that decides what a request means.
//
// A POST is read once ([Read], [ReadBody]) and decoded once, in place, into
// one [Request]: its body, the envelope's members and the few members of
// params and params._meta that decide where it goes. Every later step reads
// that value; none decodes the body again. [ParseCall] says whether a
// tools/call is one the gateway answers on its own wire ([Call]), and the
// encoders ([EncodeResult], [Notification], [ResultMessage], [SSEStream])
// write answers byte for byte as go-sdk v1.8.0 writes them, so a client
// cannot tell which side wrote one. [EraFields] drops what protocol
// 2026-07-28 added to list results from the answers of older sessions.
//
// The package knows no gateway state: no keys, no registry, no sessions.
package wire
