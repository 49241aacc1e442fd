// Package agentproto holds the wire types of the Spacefix agent protocol: the
// registration an agent posts when it opens a connection, and the JSON
// messages that travel both ways over the WebSocket afterwards.
//
// The protocol is described for SDK authors in docs/agent-protocol.md; this
// package and that page must change together, and [Version] goes up with any
// change an older peer could misread.
//
// The source is in the SDK module, core/internal/agentproto, where its
// tests, fuzz corpus and transcripts are; it is not API of the SDK. The
// gateway's module has a generated copy at internal/agentproto: edit the
// source and run `go generate ./internal/sdkcopy` at the repository's root.
package agentproto

import "encoding/json"

// Version is the agent protocol version this package speaks.
const Version = 1

// Paths of the agent endpoint.
const (
	// RegisterPath takes a POSTed [Registration] and answers with a [Ticket]
	// (200) or a plain-text reason (400, 401, 413).
	RegisterPath = "/v1/agent/register"
	// ConnectPath upgrades to the WebSocket; the ticket goes in the query
	// parameter "ticket".
	ConnectPath = "/v1/agent"
)

// Limits of one registration, as documented in SPEC.md. A project's admin may
// change the per-agent figures; these are the defaults.
const (
	MaxNameLen          = 64
	DefaultMaxTools     = 256
	DefaultMaxSchema    = 65536 // bytes of JSON per tool input schema
	DefaultMaxResources = 1000
	DefaultMaxRegister  = 512 << 10 // bytes of one whole registration
	MaxToolTimeoutMs    = 120_000
	MaxResultBytes      = 4 << 20 // one result
	MaxProgressLen      = 200     // characters of one progress line
	MaxProgressPerSec   = 4       // progress lines per second per call
	MaxErrorLogLen      = 300     // characters of an error kept in the call log
	MaxContentParts     = 16
	MaxFrameBytes       = 8 << 20 // WebSocket read limit on both sides
)

// Registration is what an agent offers. It is the JSON body of the POST to
// [RegisterPath].
type Registration struct {
	// Protocol is the [Version] the agent speaks.
	Protocol int `json:"protocol"`
	// SDK names the SDK and its version, for the dashboard ("go/0.1.0").
	SDK string `json:"sdk,omitempty"`
	// Name is the agent's name; with Namespace it prefixes tool names.
	Name string `json:"name,omitempty"`
	// Namespace exposes tools as <Name with - turned to _>_<tool>.
	Namespace bool `json:"namespace,omitempty"`
	// Instance names this replica so callers can pick it ("eu-1").
	Instance string `json:"instance,omitempty"`
	// Version is the agent's own version, shown in the dashboard.
	Version string `json:"version,omitempty"`
	// DisplayName and Author describe the agent to people (the dashboard,
	// and the prefix of community agents' descriptions).
	DisplayName string `json:"displayName,omitempty"`
	Author      string `json:"author,omitempty"`

	// Bridge, when set, says the agent is `spacefix bridge` in front of an
	// MCP server: its tool and prompt names are then registered as
	// <Name>__<server's name> (see [CheckBridgedName]), and the dashboard
	// shows what it bridges.
	Bridge *Bridge `json:"bridge,omitempty"`

	Tools     []Tool     `json:"tools"`
	Resources []Resource `json:"resources,omitempty"`
	Prompts   []Prompt   `json:"prompts,omitempty"`
}

// Bridge describes the MCP server behind a bridged agent, for people: none
// of it is a secret (no environment, no header values).
type Bridge struct {
	// Transport is how the bridge reaches the server: "stdio",
	// "streamable-http" or "sse".
	Transport string `json:"transport"`
	// Target is the command line (stdio) or the URL without query and
	// credentials (remote).
	Target string `json:"target,omitempty"`
	// Server and ServerVersion are the server's own name and version, from
	// its answer to initialize.
	Server        string `json:"server,omitempty"`
	ServerVersion string `json:"serverVersion,omitempty"`
	// Unprefixed registers the server's names as they are, under the
	// ordinary naming rules, instead of <name>__<tool>: for a project that
	// replaces the server by the gateway and keeps its clients' names.
	Unprefixed bool `json:"unprefixed,omitempty"`
	// PerPerson, when set, says the remote acts as each caller's own
	// upstream account rather than as one shared account. An older gateway
	// ignores it.
	PerPerson *PerPerson `json:"perPerson,omitempty"`
}

// PerPerson says a bridged remote acts as each caller's own upstream account.
type PerPerson struct {
	// Mode is [PerPersonConnect] (each person connects their account at the
	// gateway, which sends the person's token with each call as
	// [Caller.UpstreamToken]) or [PerPersonExchange] (the bridge exchanges
	// the call's [Caller.IdentityToken] for an upstream token itself).
	Mode string `json:"mode"`
	// URL is, in connect mode, the remote MCP URL people connect to (no
	// userinfo, no secrets).
	URL string `json:"url,omitempty"`
	// Fallback is [FallbackShared] when calls without a person (agent key
	// calls) use the bridge's own signed-in account; "" refuses them.
	Fallback string `json:"fallback,omitempty"`
}

// Modes and fallbacks of a [PerPerson] remote.
const (
	PerPersonConnect  = "connect"
	PerPersonExchange = "exchange"
	FallbackShared    = "shared"
)

// CodeUpstreamUnauthorized ends a call (TypeError with this Code) when the
// remote refused the person's [Caller.UpstreamToken] (HTTP 401). The gateway
// never passes it to a client: it refreshes the account and delivers the
// call once more, or asks the person to connect again.
const CodeUpstreamUnauthorized = -32044

// Tool is one registered tool.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  *Annotations    `json:"annotations,omitempty"`
	// TimeoutMs is the tool's own wait, up to [MaxToolTimeoutMs]; zero means
	// the project's call wait.
	TimeoutMs int `json:"timeoutMs,omitempty"`
	// Disabled registers the tool switched off (see [TypeSetEnabled]).
	Disabled bool `json:"disabled,omitempty"`
	// Execution says whether the tool may run as an MCP task; nil means
	// [TaskForbidden]. An older gateway ignores it.
	Execution *Execution `json:"execution,omitempty"`
	// IdempotencyKey names the tool's argument that carries the request
	// id: a required string property of InputSchema (see
	// [CheckIdempotencyKey]). The gateway then records each id's outcome
	// and answers a repeat itself, or re-delivers it with
	// [Message.RetryOf] after an unknown outcome. An older gateway ignores
	// it.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Task support of a tool, as MCP spells execution.taskSupport.
const (
	// TaskForbidden: the tool is never run as a task (the default).
	TaskForbidden = "forbidden"
	// TaskOptional: a client may run the tool as a task, or call it plainly.
	TaskOptional = "optional"
	// TaskRequired: the tool runs only as a task.
	TaskRequired = "required"
)

// Execution is how a tool may be run: MCP's Tool.execution.
type Execution struct {
	// TaskSupport is [TaskForbidden], [TaskOptional] or [TaskRequired];
	// "" means TaskForbidden.
	TaskSupport string `json:"taskSupport,omitempty"`
}

// TaskSupport returns the tool's task support: [TaskForbidden] when it
// declares none.
func (t *Tool) TaskSupport() string {
	if t.Execution == nil || t.Execution.TaskSupport == "" {
		return TaskForbidden
	}
	return t.Execution.TaskSupport
}

// Annotations are the MCP tool annotations; they travel to clients as given.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// Resource is one registered resource, named by its URI.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
	// Template makes URI an RFC 6570 URI template (test://orders/{id}):
	// clients list it with resources/templates/list, and a read of any URI
	// it matches is a call with Name the template and Args
	// {"uri": "<the URI read>", "params": {"id": "42"}}.
	Template bool `json:"template,omitempty"`
	// Completable, on a template, says the agent suggests values for its
	// variables: see KindComplete.
	Completable bool `json:"completable,omitempty"`
	// Disabled registers the resource switched off (see TypeSetEnabled).
	Disabled bool `json:"disabled,omitempty"`
}

// Prompt is one registered prompt template.
type Prompt struct {
	Name        string      `json:"name"`
	Title       string      `json:"title,omitempty"`
	Description string      `json:"description,omitempty"`
	Arguments   []PromptArg `json:"arguments,omitempty"`
	// Disabled registers the prompt switched off (see TypeSetEnabled).
	Disabled bool `json:"disabled,omitempty"`
}

// PromptArg is one string argument of a prompt.
type PromptArg struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// Completable says the agent suggests values for the argument: see
	// KindComplete.
	Completable bool `json:"completable,omitempty"`
}

// Ticket answers a successful registration. The agent opens the WebSocket
// at [ConnectPath]?ticket=<Ticket> within ExpiresInMs, with the same key.
type Ticket struct {
	Ticket      string `json:"ticket"`
	ExpiresInMs int    `json:"expiresInMs"`
}

// Message types. Direction: G→A gateway to agent, A→G agent to gateway.
const (
	TypeWelcome    = "welcome"          // G→A, first message: [Welcome]
	TypeCall       = "call"             // G→A: run a tool, read a resource, get a prompt
	TypeCancel     = "cancel"           // G→A: stop call ID; drop its result
	TypeProgress   = "progress"         // A→G: a progress line for call ID
	TypeResult     = "result"           // A→G: the result of call ID
	TypeError      = "error"            // A→G: call ID failed with Message (and Code, Data for a protocol error)
	TypeSetEnabled = "set_enabled"      // A→G: switch tool Name on or off in this replica only
	TypeGoodbye    = "goodbye"          // G→A: the gateway is going away; reconnect later
	TypeDrain      = "drain"            // A→G: send no new calls; the agent stops after the running ones
	TypeConfirm    = "confirm"          // A→G: ask the user a yes/no question for call ID
	TypeConfirmed  = "confirmed"        // G→A: the user's answer (Accepted) or why there is none (Message)
	TypeAsk        = "ask"              // A→G: MCP input requests for call ID's client (elicitation, sampling, roots)
	TypeAnswered   = "answered"         // G→A: the client's responses to an ask (Responses), or why there are none (Message, Code)
	TypeLog        = "log"              // A→G: a log message for call ID's client (Level, Logger, Data)
	TypeUpdated    = "resource_updated" // A→G: resource Name (a URI) changed; subscribed clients are told
)

// LogLevels are the levels of log messages, least severe first (RFC 5424,
// as MCP names them).
var LogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// MaxLogBytes caps the data of one log message.
const MaxLogBytes = 16 << 10

// Call kinds.
const (
	KindTool     = "tool"
	KindResource = "resource"
	KindPrompt   = "prompt"
	// KindComplete asks for suggested values of a prompt argument or a
	// template variable (MCP completion/complete): Name is the prompt or the
	// template, Args {"argument": "<name>", "value": "<typed so far>",
	// "context": {"<other argument>": "<value>"}}, and the result
	// {"values": ["…"]}.
	KindComplete = "complete"
)

// Retry reasons: why an earlier call's outcome is unknown (Message.RetryReason).
const (
	RetryTimeout      = "timeout"      // the earlier call's wait expired before a result
	RetryDisconnected = "disconnected" // the earlier call's agent went away before a result
)

// Cancel reasons.
const (
	ReasonCancelled = "cancelled" // the client cancelled the request
	ReasonTimeout   = "timeout"   // the call's wait expired
	ReasonShutdown  = "shutdown"  // the gateway is shutting down
)

// Message is the one envelope of every WebSocket frame; Type says which of the
// optional fields are set.
type Message struct {
	Type string `json:"type"`
	// ID is the call id, on call, cancel, progress, result and error.
	ID string `json:"id,omitempty"`

	// Kind, Name, Args, Deadline and Caller describe a call. Name is the
	// tool or prompt name as registered, or the resource URI.
	Kind     string          `json:"kind,omitempty"`
	Name     string          `json:"name,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Deadline int64           `json:"deadline,omitempty"` // Unix milliseconds
	Caller   *Caller         `json:"caller,omitempty"`
	// RetryOf and RetryReason, on a call to a tool with an
	// [Tool.IdempotencyKey], say that the call repeats an earlier one with
	// the same request id whose outcome the gateway does not know:
	// RetryOf is the earlier call's id, RetryReason [RetryTimeout] or
	// [RetryDisconnected]. Absent on a first delivery.
	RetryOf     string `json:"retryOf,omitempty"`
	RetryReason string `json:"retryReason,omitempty"`
	// TraceParent and TraceState, on call, are the W3C trace context of
	// the gateway's span for the call (the "traceparent" and "tracestate"
	// headers of https://www.w3.org/TR/trace-context/): an agent that traces
	// makes its work a child of that span. Absent when the gateway does not
	// trace and the client sent no trace context.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`

	// Message is the progress line, the error message or the goodbye text.
	Message string `json:"message,omitempty"`
	// Reason says why a call was cancelled.
	Reason string `json:"reason,omitempty"`
	// Result is a tool's [ToolResult], a resource's [ResourceResult] or a
	// prompt's [PromptResult].
	Result json.RawMessage `json:"result,omitempty"`
	// Enabled goes with set_enabled.
	Enabled *bool `json:"enabled,omitempty"`
	// Input names one question of a call, on confirm and confirmed.
	Input string `json:"input,omitempty"`
	// Accepted is the user's answer, on confirmed.
	Accepted *bool `json:"accepted,omitempty"`
	// Requests, on ask, are MCP input requests by id, as the 2026-07-28
	// inputRequests member has them: {"<id>": {"method":
	// "elicitation/create" | "sampling/createMessage" | "roots/list",
	// "params": {…}}}.
	Requests json.RawMessage `json:"requests,omitempty"`
	// Responses, on answered, are the client's results by the same ids:
	// {"<id>": ElicitResult | CreateMessageResult | ListRootsResult}.
	Responses json.RawMessage `json:"responses,omitempty"`
	// Code, on an answered without responses, is the JSON-RPC error code
	// of why: -32021 when the client did not declare the capability an
	// input request needs. On error, a code makes the failure a protocol
	// error: the client gets a JSON-RPC error with this code, Message and
	// Data instead of an isError result (see [ClientErrorCode]); 0 means
	// an isError result.
	Code int `json:"code,omitempty"`
	// Level, Logger and Data, on log, are an MCP notifications/message:
	// the RFC 5424 level (debug, info, notice, warning, error, critical,
	// alert, emergency), an optional logger name and any JSON. Data, on an
	// error with a Code, is the JSON-RPC error's data.
	Level  string          `json:"level,omitempty"`
	Logger string          `json:"logger,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	// Welcome goes with welcome.
	Welcome *Welcome `json:"welcome,omitempty"`
}

// Caller says who made a call.
type Caller struct {
	KeyID   string `json:"keyId,omitempty"`
	KeyName string `json:"keyName,omitempty"`
	// Capabilities are the client capabilities that input requests need
	// and the client declared for this call: "elicitation",
	// "elicitation.url" (URL-mode elicitation), "sampling", "roots"
	// (sorted; tools and prompts only).
	Capabilities []string `json:"capabilities,omitempty"`
	// Person is who called through an OAuth app; nil for a client key.
	Person *Person `json:"person,omitempty"`
	// App is the OAuth client the person called through; nil for a client key.
	App *App `json:"app,omitempty"`
	// Project is the name of the project the call was made in.
	Project string `json:"project,omitempty"`
	// Role is the person's role in the project (viewer, editor or owner);
	// empty for a client key.
	Role string `json:"role,omitempty"`
	// Scopes are what the call may do: "mcp:read", "mcp:write". An OAuth
	// call has the scopes granted; a client key those it allows (a
	// read-only key: just "mcp:read").
	Scopes []string `json:"scopes,omitempty"`
	// IdentityToken is the gateway's signed assertion of who is calling,
	// a JWT for the agent key's identity audience; empty unless the agent
	// key asked for one.
	IdentityToken string `json:"identityToken,omitempty"`
	// UpstreamToken is, for a per-person bridged remote in connect mode,
	// the person's access token at that remote. Only the bridge reads it;
	// never logged.
	UpstreamToken string `json:"upstreamToken,omitempty"`
}

// Person is the person behind an OAuth call.
type Person struct {
	ID    string `json:"id"`
	Email string `json:"email,omitempty"`
	Name  string `json:"name,omitempty"`
}

// App is the OAuth client (the app a person connected) a call came through.
type App struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// Welcome is the gateway's first message on a new connection.
type Welcome struct {
	Protocol    int    `json:"protocol"`
	Replica     string `json:"replica"`     // this connection's replica id
	Project     string `json:"project"`     // the key's project
	Agent       string `json:"agent"`       // the key's id
	CallWaitMs  int    `json:"callWaitMs"`  // the project's call wait
	HeartbeatMs int    `json:"heartbeatMs"` // how often each side pings
}

// ToolResult is the MCP CallToolResult an SDK builds from a handler's value.
type ToolResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError,omitempty"`
}

// ResourceResult is what a resource handler produced: Text is the string as
// is, or the JSON of any other value.
type ResourceResult struct {
	Text     string `json:"text"`
	MimeType string `json:"mimeType,omitempty"`
	// Blob, when set, is the resource's bytes (base64 on the wire) and
	// Text is unused.
	Blob []byte `json:"blob,omitempty"`
}

// PromptResult is a rendered prompt.
type PromptResult struct {
	Description string          `json:"description,omitempty"`
	Messages    []PromptMessage `json:"messages"`
}

// PromptMessage is one message of a rendered prompt; Content is an MCP
// content block ({"type":"text","text":…}).
type PromptMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}
