package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// PromptOptions describe a prompt registered with [Agent.Prompt].
type PromptOptions struct {
	// Title is the name people see in a client's menu. Empty means the
	// prompt's name.
	Title string
	// Description says what the prompt is for. Empty means none.
	Description string
	// Args are the prompt's arguments, all strings, in the order a client
	// asks for them. Nil means none.
	Args []PromptArg
}

// PromptArg is one string argument of a prompt.
type PromptArg struct {
	// Name is the argument's key in the handler's map; it is required.
	Name string
	// Description tells the user what to fill in. Empty means none.
	Description string
	// Required makes the gateway refuse a request without the argument,
	// before the handler runs.
	Required bool
	// Complete, when set, suggests values as the user types the argument
	// in a client (MCP completion/complete): value is what they typed so
	// far, args the other arguments already filled in. The first 100
	// suggestions are passed on. Without it the client gets none.
	Complete func(ctx context.Context, value string, args map[string]string) ([]string, error)
}

// PromptResult is a rendered prompt: the messages that start a
// conversation, at least one.
type PromptResult struct {
	// Description describes the rendered prompt. Empty means none.
	Description string
	// Messages are the conversation's first messages.
	Messages []PromptMessage
}

// PromptMessage is one message of a rendered prompt.
type PromptMessage struct {
	// Role is "user" or "assistant".
	Role string
	// Content is the message's body, usually [Text].
	Content Content
}

// PromptText returns a rendered prompt of one user message.
func PromptText(text string) PromptResult {
	return PromptResult{Messages: []PromptMessage{UserMessage(text)}}
}

// UserMessage returns a text message from the user.
func UserMessage(text string) PromptMessage { return PromptMessage{Role: "user", Content: Text(text)} }

// AssistantMessage returns a text message from the assistant.
func AssistantMessage(text string) PromptMessage {
	return PromptMessage{Role: "assistant", Content: Text(text)}
}

// prompt is one registered prompt.
type prompt struct {
	def      agentproto.Prompt
	h        *handler
	complete *handler // suggests argument values; see completion
}

// Prompt registers a prompt: a message template that users pick from a
// client's menu and fill in. Its name follows the rule for tool names; a
// required argument that is missing is refused before the handler runs.
// Registering after [Agent.Run] has started is an error.
func (a *Agent) Prompt(name string, opts PromptOptions, h func(ctx context.Context, args map[string]string) (PromptResult, error)) error {
	if err := a.checkName("prompt", name); err != nil {
		return fmt.Errorf("core: add prompt %q: %v", name, err)
	}
	if h == nil {
		return fmt.Errorf("core: add prompt %q: the handler is nil", name)
	}
	def := agentproto.Prompt{Name: name, Title: opts.Title, Description: opts.Description}
	seen := map[string]bool{}
	for _, arg := range opts.Args {
		if arg.Name == "" {
			return fmt.Errorf("core: add prompt %q: an argument has no name", name)
		}
		if seen[arg.Name] {
			return fmt.Errorf("core: add prompt %q: argument %q is listed twice", name, arg.Name)
		}
		seen[arg.Name] = true
		def.Arguments = append(def.Arguments, agentproto.PromptArg{Name: arg.Name, Description: arg.Description, Required: arg.Required, Completable: arg.Complete != nil})
	}
	completers := map[string]func(context.Context, string, map[string]string) ([]string, error){}
	for _, arg := range opts.Args {
		if arg.Complete != nil {
			completers[arg.Name] = arg.Complete
		}
	}
	p := &prompt{def: def, complete: completion(func(ctx context.Context, argument, value string, args map[string]string) ([]string, error) {
		c := completers[argument]
		if c == nil {
			return nil, nil
		}
		return c(ctx, value, args)
	}), h: &handler{run: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
		args := map[string]string{}
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return nil, fmt.Errorf("Invalid arguments for prompt %s: %v", name, err)
			}
		}
		r, err := h(ctx, args)
		if err != nil {
			return nil, handlerError(err)
		}
		return promptResult(r)
	}}}

	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkOpen(fmt.Sprintf("add prompt %q", name)); err != nil {
		return err
	}
	for _, other := range a.prompts {
		if other.def.Name == name {
			return fmt.Errorf("core: add prompt %q: a prompt of that name is already registered", name)
		}
	}
	a.prompts = append(a.prompts, p)
	return nil
}

// promptResult encodes a rendered prompt for the wire.
func promptResult(r PromptResult) (json.RawMessage, error) {
	if len(r.Messages) == 0 {
		return nil, errors.New("The prompt rendered no messages; return at least one.")
	}
	out := agentproto.PromptResult{Description: r.Description, Messages: make([]agentproto.PromptMessage, len(r.Messages))}
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return nil, fmt.Errorf("Prompt message %d has role %q; use user or assistant.", i+1, m.Role)
		}
		c, err := marshal(m.Content)
		if err != nil {
			return nil, resultError(err)
		}
		out.Messages[i] = agentproto.PromptMessage{Role: m.Role, Content: c}
	}
	return sized(out)
}
