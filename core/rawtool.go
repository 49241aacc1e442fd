package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// RawTool registers a tool whose input schema is raw JSON Schema, for
// schemas a struct cannot express ($defs and $ref, $anchor, allOf,
// if/then/else…) or that come from elsewhere (an OpenAPI document, a
// bridged MCP server). The schema must be a JSON object with
// "type": "object"; it is sent to clients byte for byte, and the gateway
// validates every call against it before h runs. A schema without
// "$schema" is read as JSON Schema 2020-12, as MCP says; "$schema" may
// name draft-07 or 2019-09 instead. [OutputSchema] gives the tool an
// outputSchema the same way.
//
// h receives the arguments as the client sent them (an object's JSON, "{}"
// when there were none) and returns what the model reads, as an [AddTool]
// handler does (see "Results" in the package documentation); a
// json.RawMessage it returns must be a whole MCP CallToolResult (an object
// with a "content" array) and is sent untouched, structuredContent and
// _meta included.
//
// RawTool fails on the same names as [AddTool], on a schema that is not a
// JSON object with "type": "object", on [StrictInput] (write
// "additionalProperties": false into the schema instead), and once
// [Agent.Run] has started.
func (a *Agent) RawTool(name, description string, inputSchema json.RawMessage, h func(ctx context.Context, args json.RawMessage) (any, error), opts ...ToolOption) error {
	if err := a.checkName("tool", name); err != nil {
		return fmt.Errorf("core: add tool %q: %v", name, err)
	}
	if h == nil {
		return fmt.Errorf("core: add tool %q: the handler is nil", name)
	}
	if err := objectSchema(inputSchema); err != nil {
		return fmt.Errorf("core: add tool %q: input schema: %w", name, err)
	}
	var cfg toolConfig
	for _, o := range opts {
		if err := o.applyTool(&cfg); err != nil {
			return fmt.Errorf("core: add tool %q: %w", name, err)
		}
	}
	switch {
	case cfg.strict:
		return fmt.Errorf("core: add tool %q: StrictInput applies to struct inputs; write \"additionalProperties\": false into the raw schema", name)
	case cfg.readOnly && cfg.destructive:
		return fmt.Errorf("core: add tool %q: ReadOnly and Destructive contradict each other", name)
	}
	t := &tool{
		def: agentproto.Tool{
			Name:           name,
			Title:          cfg.title,
			Description:    description,
			InputSchema:    bytes.Clone(inputSchema),
			OutputSchema:   cfg.outputSchema,
			Annotations:    cfg.annotations(),
			TimeoutMs:      cfg.timeoutMs(),
			Execution:      cfg.execution(),
			IdempotencyKey: cfg.idempotencyKey,
		},
		h: cfg.handler(func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			v, err := h(ctx, args)
			if err != nil {
				return nil, handlerError(err)
			}
			if raw, ok := v.(json.RawMessage); ok {
				return rawToolResult(raw)
			}
			return toolResult(v, false)
		}),
	}
	return a.addTool(t)
}

// OutputSchema gives a [RawTool] its outputSchema as raw JSON Schema (an
// object with "type": "object"), sent to clients unchanged. Its results
// should then carry structuredContent that matches it.
func OutputSchema(schema json.RawMessage) ToolOption {
	return toolOptionFunc(func(c *toolConfig) error {
		if err := objectSchema(schema); err != nil {
			return fmt.Errorf("OutputSchema: %w", err)
		}
		c.outputSchema = bytes.Clone(schema)
		return nil
	})
}

// objectSchema checks that raw is a JSON object whose "type" is "object",
// what MCP asks of tool schemas and the gateway enforces.
func objectSchema(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return errors.New("it must be a JSON object")
	}
	var s struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.Type != "object" {
		return errors.New(`it must have "type": "object"`)
	}
	return nil
}

// rawToolResult checks a CallToolResult a raw handler built itself and
// sends it as it is.
func rawToolResult(raw json.RawMessage) (json.RawMessage, error) {
	var r struct {
		Content *[]json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Content == nil {
		return nil, errors.New(`The tool's result is not an MCP CallToolResult: it needs a "content" array.`)
	}
	if n := len(*r.Content); n > agentproto.MaxContentParts {
		return nil, fmt.Errorf("Result has %d content parts; a tool result carries at most %d.", n, agentproto.MaxContentParts)
	}
	if len(raw) > agentproto.MaxResultBytes {
		return nil, tooLarge(len(raw))
	}
	return bytes.Clone(raw), nil
}
