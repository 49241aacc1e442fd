// Package schema is the gateway's JSON Schema validator: it compiles a
// tool's input schema once and validates call arguments against it with
// messages worded as the ajv library words them (what MCP clients and the
// seed guide show).
//
//	s, err := schema.Compile(raw)          // once, at registration
//	err = s.Validate(args)                 // per call; *ValidationError on failure
//
// The core SDK's struct-tag schema generator is package core/internal/schemagen;
// the two share only the JavaScript → RE2 pattern translation
// (core/internal/pattern; the gateway has a generated copy, internal/pattern), so
// the SDK does not link this validator or regexp2.
package schema
