package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/spacefix/spacefix/core/internal/agentproto"
	"github.com/spacefix/spacefix/core/internal/schemagen"
)

// MaxTimeout is the longest wait a tool may declare with [Timeout]; it is
// the protocol's limit.
const MaxTimeout = 120 * time.Second

// tool is one registered tool.
type tool struct {
	def      agentproto.Tool // Disabled is kept in the field below
	disabled bool
	h        *handler
}

// handler serves one kind of call. run returns the JSON of the result, or
// an error whose message is sent to the gateway as it is.
type handler struct {
	run func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
	// callTimeout (the deprecated CallTimeout) ends the handler's context
	// that long after its call arrives; zero: only the gateway's deadline
	// ends it.
	callTimeout time.Duration
}

// AddTool registers a tool named name that the model calls with arguments
// of type In and that returns Out. In must be a struct (or a pointer to
// one): its fields and struct tags become the tool's input schema (see the
// package documentation). When Out is a struct or a pointer to one (other
// than [ToolResult]), its schema is advertised as the tool's outputSchema and
// each result also goes as structuredContent.
//
// The description is what the model reads to choose the tool: say what it
// returns, what it returns when nothing matches, and which tool to use
// instead for related jobs.
//
// AddTool fails on a name that is not 1 to 64 characters from
// A-Z a-z 0-9 _ - (or that contains "__"), on a name already registered, on
// an input type that has no schema, and once [Agent.Run] has started.
func AddTool[In, Out any](a *Agent, name, description string, h func(context.Context, In) (Out, error), opts ...ToolOption) error {
	if err := a.checkName("tool", name); err != nil {
		return fmt.Errorf("core: add tool %q: %v", name, err)
	}
	if h == nil {
		return fmt.Errorf("core: add tool %q: the handler is nil", name)
	}
	var cfg toolConfig
	for _, o := range opts {
		if err := o.applyTool(&cfg); err != nil {
			return fmt.Errorf("core: add tool %q: %w", name, err)
		}
	}
	if cfg.readOnly && cfg.destructive {
		return fmt.Errorf("core: add tool %q: ReadOnly and Destructive contradict each other", name)
	}
	if cfg.outputSchema != nil {
		return fmt.Errorf("core: add tool %q: OutputSchema is for RawTool; AddTool derives the outputSchema from its output type", name)
	}

	inType := reflect.TypeFor[In]()
	in, err := schemagen.For(inType, schemagen.ForOptions{Strict: cfg.strict})
	if errors.Is(err, schemagen.ErrNotStruct) {
		return fmt.Errorf("core: tool input must be a struct (tool %q takes %v)", name, inType)
	}
	if err != nil {
		return fmt.Errorf("core: add tool %q: input: %w", name, err)
	}
	out, structured := outputSchema[Out](a, name)

	t := &tool{
		def: agentproto.Tool{
			Name:           name,
			Title:          cfg.title,
			Description:    description,
			InputSchema:    in,
			OutputSchema:   out,
			Annotations:    cfg.annotations(),
			TimeoutMs:      cfg.timeoutMs(),
			Execution:      cfg.execution(),
			IdempotencyKey: cfg.idempotencyKey,
		},
		h: cfg.handler(func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in In
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, fmt.Errorf("Invalid arguments for tool %s: %v", name, err)
			}
			v, err := h(ctx, in)
			if err != nil {
				return nil, handlerError(err)
			}
			return toolResult(v, structured)
		}),
	}

	return a.addTool(t)
}

// addTool adds t unless its name is taken, its idempotency key is not a
// required string argument, or Run has started.
func (a *Agent) addTool(t *tool) error {
	name := t.def.Name
	// The gateway refuses the registration with the same words; saying it
	// here points at the line to change.
	if err := agentproto.CheckIdempotencyKey(&t.def); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkOpen(fmt.Sprintf("add tool %q", name)); err != nil {
		return err
	}
	if a.toolNamed(name) != nil {
		return fmt.Errorf("core: add tool %q: a tool of that name is already registered; each tool needs its own name", name)
	}
	a.tools = append(a.tools, t)
	return nil
}

// outputSchema returns the outputSchema for results of type Out, and
// whether they go as structuredContent: only for structs (or pointers to
// them) whose JSON is an object we can describe.
func outputSchema[Out any](a *Agent, name string) (json.RawMessage, bool) {
	t := reflect.TypeFor[Out]()
	base := t
	if base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if base.Kind() != reflect.Struct || base == reflect.TypeFor[ToolResult]() {
		return nil, false
	}
	s, err := schemagen.For(t, schemagen.ForOptions{Output: true})
	if err != nil {
		if !errors.Is(err, schemagen.ErrNotStruct) { // e.g. time.Time: not an object
			a.log.Warn("core: no output schema for tool; its results go as JSON text only",
				"tool", name, "type", t.String(), "err", err)
		}
		return nil, false
	}
	return s, true
}

// handlerError is the message a handler's error sends: its text only.
func handlerError(err error) error {
	if err.Error() == "" {
		return fmt.Errorf("the tool failed with an empty %T error", err)
	}
	return err
}

// A ToolOption refines a tool registered with [AddTool].
type ToolOption interface {
	applyTool(*toolConfig) error
}

type toolConfig struct {
	strict                                     bool
	readOnly, destructive, idempotent, openWld bool
	title                                      string
	timeout                                    time.Duration   // from Timeout; zero: none
	callTimeout                                time.Duration   // from the deprecated CallTimeout; zero: none
	outputSchema                               json.RawMessage // RawTool's, from OutputSchema
	task                                       TaskMode        // "": forbidden
	idempotencyKey                             string          // "": none
}

// timeoutMs is the tool's own wait as registered, in whole milliseconds
// rounded up; zero: the project's call wait.
func (c *toolConfig) timeoutMs() int {
	return int((c.timeout + time.Millisecond - 1) / time.Millisecond)
}

// handler is run with the bound on its context that the tool's options
// ask for. Timeout needs none of its own: it reaches the handler as the
// gateway's deadline for the call.
func (c *toolConfig) handler(run func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)) *handler {
	return &handler{run: run, callTimeout: c.callTimeout}
}

// execution is the tool's execution as registered: nil unless it may run
// as a task.
func (c *toolConfig) execution() *agentproto.Execution {
	if c.task == "" || c.task == TaskForbidden {
		return nil
	}
	return &agentproto.Execution{TaskSupport: string(c.task)}
}

func (c *toolConfig) annotations() *agentproto.Annotations {
	if !c.readOnly && !c.destructive && !c.idempotent && !c.openWld && c.title == "" {
		return nil
	}
	yes := func(b bool) *bool {
		if !b {
			return nil
		}
		return &b
	}
	return &agentproto.Annotations{
		Title:           c.title,
		ReadOnlyHint:    yes(c.readOnly),
		DestructiveHint: yes(c.destructive),
		IdempotentHint:  yes(c.idempotent),
		OpenWorldHint:   yes(c.openWld),
	}
}

type toolOptionFunc func(*toolConfig) error

func (f toolOptionFunc) applyTool(c *toolConfig) error { return f(c) }

// StrictInput refuses arguments the input struct does not declare: every
// object in the input schema gets "additionalProperties": false.
func StrictInput() ToolOption {
	return toolOptionFunc(func(c *toolConfig) error { c.strict = true; return nil })
}

// ReadOnly marks a tool that only reads (readOnlyHint). Read-only clients
// see only such tools; a tool without it counts as a write.
func ReadOnly() ToolOption {
	return toolOptionFunc(func(c *toolConfig) error { c.readOnly = true; return nil })
}

// Destructive marks a tool that may destroy or overwrite data
// (destructiveHint).
func Destructive() ToolOption {
	return toolOptionFunc(func(c *toolConfig) error { c.destructive = true; return nil })
}

// Idempotent marks a tool that is safe to call again with the same
// arguments (idempotentHint).
func Idempotent() ToolOption {
	return toolOptionFunc(func(c *toolConfig) error { c.idempotent = true; return nil })
}

// IdempotencyKey names the tool's argument that carries a request id,
// such as "requestId": a required string argument the model fills with a
// new id for each write and reuses when it retries. The gateway then
// remembers each id's outcome for the project's repeat window (24 hours by
// default) and makes repeats safe itself: a repeat of a call that ended
// gets the same result without reaching the handler, a repeat of a running
// call waits for it, and the same id with other arguments is refused.
//
// The handler runs at most once per delivery. The one repeat the gateway
// delivers again is one after an unknown outcome (the earlier call timed
// out, or its agent disconnected before answering): [CallFrom] then gives
// [Call.RetryOf] and [Call.RetryReason], so the handler can look for the
// write the earlier call may have made before making it again.
//
// [AddTool] and [Agent.RawTool] fail when name is not a required string
// property of the input schema.
func IdempotencyKey(name string) ToolOption {
	return toolOptionFunc(func(c *toolConfig) error {
		if name == "" {
			return errors.New(`IdempotencyKey(""): name the tool's request id argument, for example "requestId"`)
		}
		c.idempotencyKey = name
		return nil
	})
}

// OpenWorld marks a tool that reaches outside systems, such as the web
// (openWorldHint).
func OpenWorld() ToolOption {
	return toolOptionFunc(func(c *toolConfig) error { c.openWld = true; return nil })
}

// Title gives the tool a name for people to read, as the tool's title and
// its title annotation.
func Title(title string) ToolOption {
	return toolOptionFunc(func(c *toolConfig) error { c.title = title; return nil })
}

// Timeout is the tool's call timeout, up to [MaxTimeout] (120 s), instead
// of the project's call wait (30 s by default): the gateway waits that
// long for the result and sends it as the call's deadline, at which the
// handler's context ends, for it to stop work whose result nobody would
// receive. A call run as a task or a job is not bound by it: its
// deadline is the project's longest task (see [TaskSupport]). A handler
// that wants to answer before the gateway gives up stops on a deadline of
// its own a little before [Call.Deadline].
func Timeout(d time.Duration) ToolOption {
	return toolOptionFunc(func(c *toolConfig) error {
		if d <= 0 || d > MaxTimeout {
			return fmt.Errorf("Timeout(%v): use a duration above 0 and at most %v", d, MaxTimeout)
		}
		c.timeout = d
		return nil
	})
}

// CallTimeout ends each handler's context d after its call arrives,
// without changing how long the gateway waits for the tool, and also in
// calls run as a task or a job.
//
// Deprecated: use [Timeout], the tool's one call timeout: the gateway's
// wait, which the handler's context already ends at. CallTimeout keeps
// working as it did for one more release.
func CallTimeout(d time.Duration) ToolOption {
	return toolOptionFunc(func(c *toolConfig) error {
		if d <= 0 {
			return fmt.Errorf("CallTimeout(%v): use a duration above 0", d)
		}
		c.callTimeout = d
		return nil
	})
}

// A TaskMode says whether MCP clients may run a tool as a task (MCP's
// execution.taskSupport): see [TaskSupport].
type TaskMode string

// Task modes.
const (
	// TaskForbidden: the tool is never run as a task; the default.
	TaskForbidden TaskMode = agentproto.TaskForbidden
	// TaskOptional: a client may run the tool as a task (it gets a task id
	// at once and polls for the result), or call it plainly.
	TaskOptional TaskMode = agentproto.TaskOptional
	// TaskRequired: the tool runs only as a task.
	TaskRequired TaskMode = agentproto.TaskRequired
)

// TaskSupport declares whether MCP clients may run the tool as a task, for
// slow work: clients see it in tools/list as execution.taskSupport. The
// handler stays the same; it does not change the tool's [Timeout].
func TaskSupport(m TaskMode) ToolOption {
	return toolOptionFunc(func(c *toolConfig) error {
		switch m {
		case TaskForbidden, TaskOptional, TaskRequired:
			c.task = m
			return nil
		}
		return fmt.Errorf("TaskSupport(%q): use TaskForbidden, TaskOptional or TaskRequired", string(m))
	})
}
