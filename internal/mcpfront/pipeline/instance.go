package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/schema"
)

// instanceArg is the optional argument the gateway adds to a tool whose
// replicas have instance names, to let the caller pick one.
const instanceArg = "instance"

// WithInstanceArg returns the input schema with the instance argument added,
// when t has named replicas and no "instance" of its own.
func WithInstanceArg(t *agents.Tool, schema json.RawMessage) json.RawMessage {
	instances := t.Instances()
	if len(instances) == 0 || t.OwnsInstance {
		return schema
	}
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return schema
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		s["properties"] = props
	}
	props[instanceArg] = map[string]any{
		"type": "string",
		"enum": instances,
		"description": fmt.Sprintf("Which instance of the agent runs this call: %s. Leave it out to let the gateway choose any.",
			strings.Join(instances, ", ")),
	}
	b, err := json.Marshal(s)
	if err != nil {
		return schema
	}
	return b
}

// errInstanceType is the ajv-worded refusal of an instance argument that is
// not a string.
var errInstanceType = &schema.ValidationError{Messages: []string{"data/" + instanceArg + " must be string"}}

// splitInstance takes the instance argument out of args. It returns a
// *[schema.ValidationError] (ajv-worded) when the argument is not a string.
// The other members keep their bytes and their order: ajv reports
// additionalProperties and the like in the caller's key order, so args are
// not re-encoded through a map.
func splitInstance(args json.RawMessage) (rest json.RawMessage, instance string, err error) {
	if !bytes.Contains(args, []byte(`"`+instanceArg+`"`)) {
		return args, "", nil
	}
	kept, raw, ok := cutMember(args, instanceArg)
	if !ok || raw == nil {
		return args, "", nil
	}
	if json.Unmarshal(raw, &instance) != nil {
		return args, "", errInstanceType
	}
	return kept, instance, nil
}

// cutMember returns the JSON object obj without its members named name, and
// the value of the last of them (as encoding/json would read it); raw is nil
// when there is none. ok is false when obj is not one well-formed object.
func cutMember(obj json.RawMessage, name string) (kept, raw json.RawMessage, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	out := []byte{'{'}
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, false
		}
		if key == name {
			raw = v
			continue
		}
		// From the end of the previous member (or the brace) to the end of
		// this one: the separating comma and spaces, then key and value.
		member := bytes.TrimLeft(obj[start:dec.InputOffset()], " \t\r\n,")
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, member...)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, false // something after the object
	}
	return append(out, '}'), raw, true
}

// instanceProblem is what a caller reads when the instance it named is not
// connected.
func instanceProblem(t *agents.Tool, instance string) string {
	connected := t.Instances()
	if len(connected) == 0 {
		return fmt.Sprintf("Instance %q of tool %s is not connected, and no connected replica has an instance name. Leave instance out.", instance, t.Name)
	}
	return fmt.Sprintf("Instance %q of tool %s is not connected. Connected instances: %s. Leave instance out to let the gateway choose.",
		instance, t.Name, strings.Join(connected, ", "))
}

// commonSchema returns the input schema every replica a call of t could go
// to validates it with (those of the instance, if one is named), or nil if
// there is no replica or they differ: then go-sdk's path picks one.
func commonSchema(t *agents.Tool, instance string) *schema.Schema {
	var s *schema.Schema
	for _, rep := range t.Replicas {
		if instance != "" && rep.Instance != instance {
			continue
		}
		rs := t.SchemaOn(rep)
		if rs == nil || (s != nil && rs != s) {
			return nil
		}
		s = rs
	}
	return s
}
