// Package schema is JSON Schema for Spacefix: it compiles a tool's input
// schema once and validates call arguments against it with messages worded
// as the ajv library words them (what MCP clients and the seed guide show),
// and it derives a schema from a Go type and its struct tags for the core SDK.
//
// Validation (validate.go):
//
//	s, err := schema.Compile(raw)          // once, at registration
//	err = s.Validate(args)                 // per call; *ValidationError on failure
//
// Generation (reflect.go):
//
//	raw, err := schema.For(reflect.TypeFor[In](), schema.ForOptions{Strict: true})
package schema
