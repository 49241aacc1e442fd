// Package pipeline runs every tools/call the MCP endpoint takes, whichever
// protocol era's wire it came in on, down one ordered list of stages; it
// also serves the other calls that reach an agent (resources/read,
// prompts/get, completion) with the same steps where they apply.
//
// # Where it sits
//
// The endpoint is three rooms over one wire:
//
//	mcpfront            the endpoint: dispatch by era, one go-sdk server (view) per
//	                    client key, the early path that answers plain calls itself
//	  session           2025 sessions: what go-sdk does not keep of them, their
//	                    2025-11-25 tasks, questions on an early call's own stream
//	  stateless         2026-07-28: the tasks extension go-sdk does not implement
//	pipeline            this package: every tools/call, once, in one order
//	wire                a POST read and decoded once; answers written as go-sdk writes them
//
// Arrows run downward only (internal/archtest holds it): the eras call
// the pipeline, which knows neither era. What an era must give a call is
// passed as values: the [Request] it read, a [Stream] and an [Asker] for a
// call answered on its own response stream, the session hook
// Options.TrackCall.
//
// # One call
//
// A plain call, whether go-sdk parsed it (its tool handler,
// [Pipeline.ToolHandler]) or the early path did ([Pipeline.Serve] with a
// [Call] made by [NewCall] and carried by [WithCall]), is one [Request]
// — the stages never see a request of go-sdk's types that go-sdk did not
// parse — in one [Call] value that goes down the stages, each a small type
// in a file of its own (stage_*.go):
//
//	admit    the tool in the caller's view, the call's own lifetime
//	resume   a call already under way (a retry with the user's answer):
//	         settled here
//	resolve  the instance argument, the replica, validation there, the
//	         person's upstream account: the call is picked, not sent
//	policy   the policy point: the project's rules and interceptors on
//	         the call, and on its answer on the way back
//	cache    a cached result answers; a fresh one is kept on the way back
//	repeat   a repeat-safe tool's request id is claimed, or answered
//	shape    how the call ended becomes the client's answer
//	run      sent to the replica directly, started as a job, or started
//	         as a task (a task-augmented call of either era)
//
// The order is written once, in toolStages. A stage decides (it answers
// and does not go on), or enriches the call and hands it to the next
// stage. Once a call is settled (how it stands is known), only policy
// (which shapes its answer for its caller) and shape are left: the runner
// skips there, so the stages between never see a call they did not start.
//
// A task-augmented call of either era enters through
// [Pipeline.StartTask]: it is resolved and passes the policy point as any
// call, is neither cached nor claimed as a repeat (its client holds the
// task), and the era's entry answers its task, or how it was refused
// ([TaskStart]), in its era's words. A job (a slow tool for a client that
// speaks no tasks, jobs.go) is a task of era "job" started by the run
// stage.
//
// Rate limit and admission ([Pipeline.AdmitCall]) come first, in the
// view's middleware or the early path, because go-sdk must not answer a
// call of a tool the view no longer has with its own words.
//
// # Questions
//
// An agent's question (core.Confirm, core.Ask) reaches the client the way
// its era asks: a 2025 session's request to its client (through go-sdk's
// session, or an [Asker] on the call's own stream), a 2026-07-28
// input_required result whose requestState the pipeline seals so that any
// gateway of a cluster opens it (confirm.go), or a task's input_required
// status.
package pipeline
