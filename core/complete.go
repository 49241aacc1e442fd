package core

import (
	"context"
	"encoding/json"
	"fmt"
)

// MaxCompletions is how many suggested values of one completion the
// gateway passes on (the MCP limit).
const MaxCompletions = 100

// completion turns a completer into the handler of KindComplete calls for
// one prompt or template: f gets the argument (or variable) name, what
// the user typed and the other values filled in, and returns suggestions;
// nil, nil means none.
func completion(f func(ctx context.Context, argument, value string, args map[string]string) ([]string, error)) *handler {
	return &handler{run: func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
		var in struct {
			Argument string            `json:"argument"`
			Value    string            `json:"value"`
			Context  map[string]string `json:"context"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("the gateway sent a completion request this agent cannot read: %v", err)
		}
		if in.Context == nil {
			in.Context = map[string]string{}
		}
		values, err := f(ctx, in.Argument, in.Value, in.Context)
		if err != nil {
			return nil, handlerError(err)
		}
		if values == nil {
			values = []string{}
		}
		return json.Marshal(map[string]any{"values": values})
	}}
}
