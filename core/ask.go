package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/spacefix/spacefix/core/internal/agentproto"
)

// ErrMissingCapability is wrapped by the error of [Elicit], [Sample] and
// [Roots] when the MCP client did not declare the capability the request
// needs (elicitation, sampling or roots). On protocol 2026-07-28 the call
// has then already failed for the client with JSON-RPC error -32021, so
// that it can declare the capability and call again; on 2025 sessions the
// handler decides what to do (return an error the model reads, or go on
// without).
var ErrMissingCapability = errors.New("the MCP client did not declare the capability")

// ElicitResult is the user's answer to [Elicit].
type ElicitResult struct {
	// Action is "accept", "decline" or "cancel" (dismissed).
	Action string `json:"action"`
	// Content is the form's values when the user accepted, checked by the
	// gateway against the schema asked for.
	Content map[string]any `json:"content,omitempty"`
}

// Accepted reports whether the user accepted (and Content holds the form).
func (r ElicitResult) Accepted() bool { return r.Action == "accept" }

// Elicit asks the user of the MCP client to fill in a form: message says
// what for, requestedSchema is the form, a JSON Schema object of flat
// properties as MCP's elicitation allows (strings with optional format
// email, uri, date or date-time; numbers and integers with bounds;
// booleans; enums, with titles through oneOf/anyOf of const and title;
// defaults). It may be a map, a json.RawMessage or any value that marshals
// to one.
//
// The gateway asks through MCP elicitation (elicitation/create on 2025-era
// sessions, an input request on 2026-07-28); the question counts against
// the call's wait. Elicit returns the user's action and content; an error
// wrapping [ErrMissingCapability] when the client cannot ask; ctx's error
// when the call ends first. [Confirm] is the yes/no shorthand.
func Elicit(ctx context.Context, message string, requestedSchema any) (ElicitResult, error) {
	var out ElicitResult
	raw, err := ask(ctx, "elicitation/create", map[string]any{"mode": "form", "message": message, "requestedSchema": requestedSchema})
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("core: elicit: the client's answer is not an elicitation result: %w", err)
	}
	return out, nil
}

// SamplingMessage is one message of a [SampleRequest].
type SamplingMessage struct {
	Role    string  `json:"role"` // "user" or "assistant"
	Content Content `json:"content"`
}

// ModelHint names a model the client may pick (a substring of its name).
type ModelHint struct {
	Name string `json:"name,omitempty"`
}

// ModelPreferences say what matters in the model the client picks, each
// priority from 0 to 1.
type ModelPreferences struct {
	Hints                []ModelHint `json:"hints,omitempty"`
	CostPriority         float64     `json:"costPriority,omitempty"`
	SpeedPriority        float64     `json:"speedPriority,omitempty"`
	IntelligencePriority float64     `json:"intelligencePriority,omitempty"`
}

// SampleRequest asks the client's model to write a message (MCP
// sampling/createMessage).
type SampleRequest struct {
	Messages         []SamplingMessage `json:"messages"`
	SystemPrompt     string            `json:"systemPrompt,omitempty"`
	MaxTokens        int               `json:"maxTokens"`
	Temperature      float64           `json:"temperature,omitempty"`
	StopSequences    []string          `json:"stopSequences,omitempty"`
	ModelPreferences *ModelPreferences `json:"modelPreferences,omitempty"`
	// IncludeContext is "none", "thisServer" or "allServers"; "" means none.
	IncludeContext string `json:"includeContext,omitempty"`
}

// SampleResult is what the client's model wrote.
type SampleResult struct {
	Role       string    `json:"role"`
	Content    []Content `json:"-"` // one part, or several
	Model      string    `json:"model"`
	StopReason string    `json:"stopReason,omitempty"`
}

// Text returns the result's text parts, joined.
func (r SampleResult) Text() string {
	var s string
	for _, c := range r.Content {
		if c.Type == "text" {
			s += c.Text
		}
	}
	return s
}

// UnmarshalJSON reads a CreateMessageResult, whose content is one block
// or (since 2025-11-25) a list.
func (r *SampleResult) UnmarshalJSON(b []byte) error {
	type plain SampleResult
	var w struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = SampleResult(w.plain)
	if len(w.Content) > 0 && w.Content[0] == '[' {
		return json.Unmarshal(w.Content, &r.Content)
	}
	var one Content
	if err := json.Unmarshal(w.Content, &one); err != nil {
		return err
	}
	r.Content = []Content{one}
	return nil
}

// UnmarshalJSON reads an MCP content block.
func (c *Content) UnmarshalJSON(b []byte) error {
	var w struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     []byte `json:"data"`
		MimeType string `json:"mimeType"`
		Resource *struct {
			URI      string `json:"uri"`
			MimeType string `json:"mimeType"`
			Text     string `json:"text"`
			Blob     []byte `json:"blob"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = Content{Type: w.Type, Text: w.Text, Data: w.Data, MimeType: w.MimeType}
	if w.Resource != nil {
		c.URI, c.MimeType, c.Text, c.Data = w.Resource.URI, w.Resource.MimeType, w.Resource.Text, w.Resource.Blob
	}
	return nil
}

// Sample asks the MCP client's model to write a message, for a handler that
// needs a model's help (summarise, classify, draft) without a model of its
// own. The client usually shows the request to its user first. The
// request counts against the call's wait. The error wraps
// [ErrMissingCapability] when the client does not offer sampling.
func Sample(ctx context.Context, req SampleRequest) (SampleResult, error) {
	var out SampleResult
	if req.MaxTokens <= 0 {
		return out, errors.New("core: sample: MaxTokens must be positive")
	}
	raw, err := ask(ctx, "sampling/createMessage", req)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("core: sample: the client's answer is not a sampling result: %w", err)
	}
	return out, nil
}

// Root is a directory or file the client's user lets servers work in.
type Root struct {
	URI  string `json:"uri"` // a file:// URI
	Name string `json:"name,omitempty"`
}

// Roots returns the client's roots (MCP roots/list): where its user works.
// The error wraps [ErrMissingCapability] when the client offers none.
func Roots(ctx context.Context) ([]Root, error) {
	raw, err := ask(ctx, "roots/list", map[string]any{})
	if err != nil {
		return nil, err
	}
	var out struct {
		Roots []Root `json:"roots"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("core: roots: the client's answer is not a roots list: %w", err)
	}
	return out.Roots, nil
}

// ElicitRequest is a form for [Together]: what [Elicit] takes.
type ElicitRequest struct {
	Message string
	Schema  any
	// ID, in [Inputs.Elicits], names the request on the wire (see
	// [Inputs.ElicitID]); empty means an id of the SDK's own.
	ID string
}

// Inputs are input requests asked in one round by [Together]; each may be
// left out.
type Inputs struct {
	Elicit *ElicitRequest
	// Elicits are more forms for the same round, answered in
	// [Answers.Elicits] in the same order: two questions the user answers
	// at once, for example. Elicit and Elicits may be used together.
	Elicits []ElicitRequest
	Sample  *SampleRequest
	Roots   bool
	// ElicitID, SampleID and RootsID name the input requests on the wire
	// (the keys of a 2026-07-28 client's inputRequests), for clients that
	// look for particular ones; empty means ids of the SDK's own. They must
	// differ from each other and from the IDs of Elicits.
	ElicitID, SampleID, RootsID string
}

// Answers are the client's responses to [Together], for the requests asked.
type Answers struct {
	Elicit ElicitResult
	// Elicits are the answers to [Inputs.Elicits], in the same order.
	Elicits []ElicitResult
	Sample  SampleResult
	Roots   []Root
}

// maxInputs is how many input requests the gateway passes on in one round.
const maxInputs = 8

// Together asks the client for several inputs in one round: forms, a
// model's message and the roots, as one input_required result on 2026-07-28
// (one retry) and as parallel requests on 2025 sessions. It fails as a whole
// when the client cannot give any of them. At most 8 requests go in one
// round.
func Together(ctx context.Context, in Inputs) (Answers, error) {
	var out Answers
	reqs := map[string]inputRequest{}
	if in.Elicit != nil {
		reqs["elicit"] = inputRequest{"elicitation/create", elicitParams(*in.Elicit), in.ElicitID}
	}
	for i, e := range in.Elicits {
		reqs["elicit-"+strconv.Itoa(i+1)] = inputRequest{"elicitation/create", elicitParams(e), e.ID}
	}
	if in.Sample != nil {
		if in.Sample.MaxTokens <= 0 {
			return out, errors.New("core: together: Sample.MaxTokens must be positive")
		}
		reqs["sample"] = inputRequest{"sampling/createMessage", in.Sample, in.SampleID}
	}
	if in.Roots {
		reqs["roots"] = inputRequest{"roots/list", map[string]any{}, in.RootsID}
	}
	if len(reqs) == 0 {
		return out, errors.New("core: together: no input requested")
	}
	if len(reqs) > maxInputs {
		return out, fmt.Errorf("core: together: %d input requests; at most %d go in one round", len(reqs), maxInputs)
	}
	if err := distinctIDs(reqs); err != nil {
		return out, err
	}
	rs, err := askAll(ctx, "together", reqs)
	if err != nil {
		return out, err
	}
	if raw := rs["elicit"]; raw != nil {
		if err := json.Unmarshal(raw, &out.Elicit); err != nil {
			return out, fmt.Errorf("core: together: the client's answer is not an elicitation result: %w", err)
		}
	}
	if len(in.Elicits) > 0 {
		out.Elicits = make([]ElicitResult, len(in.Elicits))
		for i := range in.Elicits {
			if err := json.Unmarshal(rs["elicit-"+strconv.Itoa(i+1)], &out.Elicits[i]); err != nil {
				return out, fmt.Errorf("core: together: the client's answer to form %d is not an elicitation result: %w", i+1, err)
			}
		}
	}
	if raw := rs["sample"]; raw != nil {
		if err := json.Unmarshal(raw, &out.Sample); err != nil {
			return out, fmt.Errorf("core: together: the client's answer is not a sampling result: %w", err)
		}
	}
	if raw := rs["roots"]; raw != nil {
		var r struct {
			Roots []Root `json:"roots"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return out, fmt.Errorf("core: together: the client's answer is not a roots list: %w", err)
		}
		out.Roots = r.Roots
	}
	return out, nil
}

// elicitParams are the params of a form's elicitation/create.
func elicitParams(e ElicitRequest) map[string]any {
	return map[string]any{"mode": "form", "message": e.Message, "requestedSchema": e.Schema}
}

// distinctIDs refuses a round whose wire ids, given by the caller, repeat:
// one answer would go to two requests.
func distinctIDs(reqs map[string]inputRequest) error {
	seen := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		if r.id == "" {
			continue
		}
		if seen[r.id] {
			return fmt.Errorf("core: together: input request id %q is given twice; each request needs its own", r.id)
		}
		seen[r.id] = true
	}
	return nil
}

// inputRequest is one MCP input request as the agent protocol carries it.
type inputRequest struct {
	Method string `json:"method"`
	Params any    `json:"params"`
	id     string // the wire id; "" means one of the round's
}

// ask sends one input request for the call ctx serves and waits for the
// client's response to it.
func ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	rs, err := askAll(ctx, method, map[string]inputRequest{"": {method, params, ""}})
	if err != nil {
		return nil, err
	}
	return rs[""], nil
}

// askAll sends input requests by name for the call ctx serves and waits
// for the client's responses to all of them. what names the caller in
// errors.
func askAll(ctx context.Context, what string, reqs map[string]inputRequest) (map[string]json.RawMessage, error) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok {
		return nil, fmt.Errorf("core: %s is for use inside a handler, with its ctx", what)
	}
	c.mu.Lock()
	c.inputs++
	round := "in-" + strconv.Itoa(c.inputs)
	c.mu.Unlock()
	// Ids are unique per round ("in-2", or "in-2-sample" among several), so
	// a late answer to an earlier round never matches.
	id := func(name string) string {
		switch {
		case reqs[name].id != "":
			return reqs[name].id
		case name == "":
			return round
		}
		return round + "-" + name
	}
	ids := make(map[string]inputRequest, len(reqs))
	for name, r := range reqs {
		ids[id(name)] = r
	}
	raw, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("core: %s: %w", what, err)
	}
	if err := c.sess.send(agentproto.Message{Type: agentproto.TypeAsk, ID: c.info.ID, Requests: raw}); err != nil {
		return nil, fmt.Errorf("core: %s: %w", what, err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case m := <-c.confirmed:
			if m.Type != agentproto.TypeAnswered {
				continue // a Confirm's answer that came too late
			}
			if m.Responses == nil {
				if m.Code == -32021 {
					return nil, fmt.Errorf("core: %s: %w: %s", what, ErrMissingCapability, m.Message)
				}
				return nil, fmt.Errorf("core: %s: %s", what, m.Message)
			}
			var rs map[string]json.RawMessage
			if err := json.Unmarshal(m.Responses, &rs); err != nil {
				return nil, fmt.Errorf("core: %s: the gateway's answer is not JSON: %w", what, err)
			}
			out := make(map[string]json.RawMessage, len(reqs))
			for name := range reqs {
				if rs[id(name)] == nil {
					return nil, fmt.Errorf("core: %s: the gateway's answer has no response to %s", what, id(name))
				}
				out[name] = rs[id(name)]
			}
			return out, nil
		}
	}
}
