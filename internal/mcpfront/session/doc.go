// Package session is the MCP endpoint's own part of the 2025 protocol
// versions (2025-06-18 and 2025-11-25), whose sessions go-sdk keeps: what
// the gateway knows of a key's sessions beside go-sdk ([Sessions]: use,
// GET streams, calls in flight, the log level a client set, the cap and
// the keepalive), the 2025-11-25 task methods go-sdk does not implement
// (tasks/get, tasks/result, tasks/list, tasks/cancel, and a task-augmented
// tools/call answered before go-sdk: [Era.AnswerTaskCall]), and the
// questions a call answered on its own stream puts to its client
// ([StreamAsker]).
//
// It sits beside the stateless era and above the call pipeline: a
// task-augmented call goes through [pipeline.Pipeline.StartTask], the
// same stages as every tools/call. The endpoint (package mcpfront) owns
// the HTTP dispatch and one go-sdk server per client key, and makes one
// [Sessions] per key ([Era.ForKey]).
package session
