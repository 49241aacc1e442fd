package mcpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spacefix/spacefix/internal/agents"
)

// instanceArg is the optional argument the gateway adds to a tool whose
// replicas have instance names, to let the caller pick one.
const instanceArg = "instance"

// withInstanceArg returns the input schema with the instance argument added,
// when t has named replicas and no "instance" of its own.
func withInstanceArg(t *agents.Tool, schema json.RawMessage) json.RawMessage {
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

// splitInstance takes the instance argument out of args. It returns a
// validation message (ajv-worded) when the argument is not a string.
func splitInstance(args json.RawMessage) (rest json.RawMessage, instance, problem string) {
	if !bytes.Contains(args, []byte(`"`+instanceArg+`"`)) {
		return args, "", ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return args, "", ""
	}
	raw, ok := m[instanceArg]
	if !ok {
		return args, "", ""
	}
	if json.Unmarshal(raw, &instance) != nil {
		return args, "", "data/instance must be string"
	}
	delete(m, instanceArg)
	rest, _ = json.Marshal(m)
	return rest, instance, ""
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
