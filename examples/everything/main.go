// Command everything is an agent that offers what the official MCP
// conformance suite's server scenarios ask of an "everything" server —
// tools, resources, templates, prompts, logging, progress, elicitation,
// sampling, roots, completion — written only against core, so that the
// suite run through the gateway measures what an agent can do
// (e2e/conformance_test.go). Its names and texts are those of go-sdk's
// conformance/everything-server.
//
//	SPACEFIX_API_KEY=sfx_agent_… go run ./examples/everything
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spacefix/spacefix/core"
)

const (
	testImageBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	testAudioBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
	watchedURI      = "test://watched-resource"
)

func decode(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

var (
	imageData = decode(testImageBase64)
	audioData = decode(testAudioBase64)
)

type empty struct{}

func main() {
	a, err := core.New(core.Options{Name: "everything"})
	if err != nil {
		log.Fatal(err)
	}
	if err := register(a); err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The watched resource changes every 3 seconds.
		t := time.NewTicker(3 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				a.ResourceChanged(watchedURI)
			}
		}
	}()
	if err := a.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// must panics on a registration error: they are programming errors here.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

func register(a *core.Agent) error {
	text := func(name, desc, out string) {
		must(core.AddTool(a, name, desc, func(ctx context.Context, _ empty) (string, error) { return out, nil }))
	}
	text("test_simple_text", "Tests simple text content response", "This is a simple text response for testing.")
	must(core.AddTool(a, "test_image_content", "Tests image content response", func(ctx context.Context, _ empty) (core.ToolResult, error) {
		return core.ToolResult{Content: []core.Content{core.Image(imageData, "image/png")}}, nil
	}))
	must(core.AddTool(a, "test_audio_content", "Tests audio content response", func(ctx context.Context, _ empty) (core.ToolResult, error) {
		return core.ToolResult{Content: []core.Content{core.Audio(audioData, "audio/wav")}}, nil
	}))
	must(core.AddTool(a, "test_embedded_resource", "Tests embedded resource content response", func(ctx context.Context, _ empty) (core.ToolResult, error) {
		return core.ToolResult{Content: []core.Content{core.EmbeddedText("test://embedded-resource", "text/plain", "This is an embedded resource")}}, nil
	}))
	must(core.AddTool(a, "test_multiple_content_types", "Tests response with multiple content types (text, image, resource)", func(ctx context.Context, _ empty) (core.ToolResult, error) {
		return core.ToolResult{Content: []core.Content{
			core.Text("This is text content"), core.Image(imageData, "image/png"),
			core.EmbeddedText("test://embedded-in-multiple", "text/plain", "This is an embedded resource"),
		}}, nil
	}))
	must(core.AddTool(a, "test_tool_with_logging", "Tests tool that emits log messages during execution", func(ctx context.Context, _ empty) (string, error) {
		for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			core.Log(ctx, core.LogInfo, msg)
		}
		return "Tool with logging executed successfully", nil
	}))
	must(core.AddTool(a, "test_tool_with_progress", "Tests tool that reports progress notifications", func(ctx context.Context, _ empty) (string, error) {
		for _, p := range []int{0, 50, 100} {
			core.Progress(ctx, fmt.Sprintf("Completed step %d of 100", p))
			time.Sleep(50 * time.Millisecond)
		}
		return "progress reported", nil
	}))
	must(core.AddTool(a, "test_error_handling", "Tests error response handling", func(ctx context.Context, _ empty) (string, error) {
		return "", errors.New("this tool intentionally returns an error for testing")
	}))
	type promptIn struct {
		Prompt string `json:"prompt" desc:"The prompt to send to the LLM"`
	}
	must(core.AddTool(a, "test_sampling", "Tests server-initiated sampling (LLM completion request)", func(ctx context.Context, in promptIn) (string, error) {
		r, err := core.Sample(ctx, core.SampleRequest{Messages: []core.SamplingMessage{{Role: "user", Content: core.Text(in.Prompt)}}, MaxTokens: 100})
		if err != nil {
			return "", fmt.Errorf("sampling failed: %w", err)
		}
		return "LLM response: " + r.Text(), nil
	}))
	type messageIn struct {
		Message string `json:"message" desc:"The message to show the user"`
	}
	elicit := func(ctx context.Context, message string, schema any) (string, error) {
		r, err := core.Elicit(ctx, message, schema)
		if err != nil {
			return "", fmt.Errorf("elicitation failed: %w", err)
		}
		return fmt.Sprintf("Elicitation result: action=%s, content=%v", r.Action, r.Content), nil
	}
	must(core.AddTool(a, "test_elicitation", "Tests server-initiated elicitation (user input request)", func(ctx context.Context, in messageIn) (string, error) {
		return elicit(ctx, in.Message, obj(map[string]any{"username": map[string]any{"type": "string", "description": "Your preferred username"}}, "username"))
	}))
	must(core.AddTool(a, "test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034", func(ctx context.Context, _ empty) (string, error) {
		return elicit(ctx, "Test defaults for primitives", obj(map[string]any{
			"name":     map[string]any{"type": "string", "description": "User name", "default": "John Doe"},
			"age":      map[string]any{"type": "integer", "description": "User age", "default": 30},
			"score":    map[string]any{"type": "number", "description": "User score", "default": 95.5},
			"status":   map[string]any{"type": "string", "description": "User status", "enum": []string{"active", "inactive", "pending"}, "default": "active"},
			"verified": map[string]any{"type": "boolean", "description": "Verification status", "default": true},
		}))
	}))
	titled := []map[string]any{{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}}
	must(core.AddTool(a, "test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330", func(ctx context.Context, _ empty) (string, error) {
		return elicit(ctx, "Test enum schemas", obj(map[string]any{
			"untitledSingle": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}},
			"titledSingle":   map[string]any{"type": "string", "oneOf": titled},
			"legacyEnum":     map[string]any{"type": "string", "enum": []string{"opt1", "opt2", "opt3"}, "enumNames": []string{"Option One", "Option Two", "Option Three"}},
			"untitledMulti":  map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"type": "string", "enum": []string{"option1", "option2", "option3"}}},
			"titledMulti":    map[string]any{"type": "array", "minItems": 1, "maxItems": 3, "items": map[string]any{"type": "string", "anyOf": titled}},
		}))
	}))
	must(a.RawTool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613, SEP-2106)", json.RawMessage(jsonSchema202012),
		func(ctx context.Context, args json.RawMessage) (any, error) {
			return "JSON Schema 2020-12 tool called with: " + string(args), nil
		}))
	text("test_reconnection", "Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after client reconnects.",
		"Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.")
	must(a.RawTool("test_x_mcp_header", "Tests SEP-2243 Mcp-Param-* server-side validation", json.RawMessage(`{
		"type": "object",
		"properties": {
			"region": { "type": "string", "description": "mirrored into Mcp-Param-Region", "x-mcp-header": "Region" },
			"level": { "type": "integer", "description": "non-mirrored argument" }
		}
	}`), func(ctx context.Context, args json.RawMessage) (any, error) {
		var in struct {
			Region string `json:"region"`
		}
		json.Unmarshal(args, &in)
		return "region=" + in.Region, nil
	}))
	text("test_streaming_elicitation", "Tests that the response stream carries no independent requests", "stream observed: result frames only, no top-level requests")
	must(core.AddTool(a, "test_missing_capability", "Needs the client's sampling capability (SEP-2575)", func(ctx context.Context, _ empty) (string, error) {
		if core.ClientCan(ctx, "sampling") {
			return "Client declared the sampling capability; tool executed.", nil
		}
		// Asking without it fails the call with -32021, as SEP-2575 wants.
		_, err := core.Sample(ctx, core.SampleRequest{Messages: []core.SamplingMessage{{Role: "user", Content: core.Text("ping")}}, MaxTokens: 1})
		return "", err
	}))
	must(core.AddTool(a, "test_logging_tool", "Emits a log message when the client asked for logs", func(ctx context.Context, _ empty) (string, error) {
		core.Log(ctx, core.LogInfo, "test_logging_tool executed")
		return "Log attempted; framework gates on _meta.../logLevel.", nil
	}))
	registerInputRequired(a)
	registerTasks(a)
	registerResources(a)
	registerPrompts(a)
	return nil
}

// obj is an object schema of properties, some required.
func obj(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

var nameSchema = obj(map[string]any{"name": map[string]any{"type": "string"}}, "name")

func registerInputRequired(a *core.Agent) {
	// The suite looks for the input requests by the ids go-sdk's
	// everything-server gives them: core.Together names them.
	ask := func(ctx context.Context, in core.Inputs) (core.Answers, error) { return core.Together(ctx, in) }
	must(core.AddTool(a, "test_input_required_result_elicitation", "MRTR (SEP-2322): asks for the user's name", func(ctx context.Context, _ empty) (string, error) {
		r, err := ask(ctx, core.Inputs{Elicit: &core.ElicitRequest{Message: "What is your name?", Schema: nameSchema}, ElicitID: "user_name"})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Hello, %v!", r.Elicit.Content["name"]), nil
	}))
	must(core.AddTool(a, "test_input_required_result_sampling", "MRTR (SEP-2322): asks the client's model", func(ctx context.Context, _ empty) (string, error) {
		r, err := ask(ctx, core.Inputs{Sample: &core.SampleRequest{Messages: []core.SamplingMessage{{Role: "user", Content: core.Text("What is the capital of France?")}}, MaxTokens: 100},
			SampleID: "capital_question"})
		if err != nil {
			return "", err
		}
		return "Sampling response: " + r.Sample.Text(), nil
	}))
	must(core.AddTool(a, "test_input_required_result_list_roots", "MRTR (SEP-2322): asks for the client's roots", func(ctx context.Context, _ empty) (string, error) {
		r, err := ask(ctx, core.Inputs{Roots: true, RootsID: "client_roots"})
		if err != nil {
			return "", err
		}
		roots := r.Roots
		var uris []string
		for _, r := range roots {
			uris = append(uris, r.URI)
		}
		return fmt.Sprintf("Client exposed %d root(s): %s", len(roots), strings.Join(uris, ", ")), nil
	}))
	confirm := obj(map[string]any{"ok": map[string]any{"type": "boolean"}}, "ok")
	stateOK := func(ctx context.Context, _ empty) (string, error) {
		if _, err := ask(ctx, core.Inputs{Elicit: &core.ElicitRequest{Message: "Please confirm", Schema: confirm}, ElicitID: "confirm"}); err != nil {
			return "", err
		}
		return "state-ok: requestState received and confirmation accepted", nil
	}
	must(core.AddTool(a, "test_input_required_result_request_state", "MRTR (SEP-2322): a confirmation carried by requestState", stateOK))
	must(core.AddTool(a, "test_input_required_result_tampered_state", "MRTR (SEP-2322): a tampered requestState is refused", stateOK))
	must(core.AddTool(a, "test_input_required_result_multiple_inputs", "MRTR (SEP-2322): several input requests in one round", func(ctx context.Context, _ empty) (string, error) {
		r, err := core.Together(ctx, core.Inputs{
			Elicit: &core.ElicitRequest{Message: "What is your name?", Schema: nameSchema},
			Sample: &core.SampleRequest{Messages: []core.SamplingMessage{{Role: "user", Content: core.Text("Generate a short greeting")}}, MaxTokens: 50},
			Roots:  true, ElicitID: "user_name", SampleID: "greeting", RootsID: "client_roots",
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %v — %d root(s) visible", r.Sample.Text(), r.Elicit.Content["name"], len(r.Roots)), nil
	}))
	must(core.AddTool(a, "test_input_required_result_multi_round", "MRTR (SEP-2322): two rounds of questions", func(ctx context.Context, _ empty) (string, error) {
		r1, err := ask(ctx, core.Inputs{Elicit: &core.ElicitRequest{Message: "Step 1: What is your name?", Schema: nameSchema}, ElicitID: "step1"})
		if err != nil {
			return "", err
		}
		r2, err := ask(ctx, core.Inputs{Elicit: &core.ElicitRequest{Message: "Step 2: What is your favorite color?",
			Schema: obj(map[string]any{"color": map[string]any{"type": "string"}}, "color")}, ElicitID: "step2"})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Multi-round complete: %v likes %v", r1.Elicit.Content["name"], r2.Elicit.Content["color"]), nil
	}))
	must(core.AddTool(a, "test_input_required_result_capabilities", "MRTR (SEP-2322): asks only for what the client declared", func(ctx context.Context, _ empty) (string, error) {
		// Ask only for what the client declared.
		var in core.Inputs
		if core.ClientCan(ctx, "elicitation") {
			in.Elicit, in.ElicitID = &core.ElicitRequest{Message: "What is your name?", Schema: nameSchema}, "user_name"
		}
		if core.ClientCan(ctx, "sampling") {
			in.Sample, in.SampleID = &core.SampleRequest{Messages: []core.SamplingMessage{{Role: "user", Content: core.Text("Generate a short greeting")}}, MaxTokens: 50}, "greeting"
		}
		if core.ClientCan(ctx, "roots") {
			in.Roots, in.RootsID = true, "client_roots"
		}
		if in.Elicit == nil && in.Sample == nil && !in.Roots {
			return "No declared client capability supports an in-band input request", nil
		}
		if _, err := ask(ctx, in); err != nil {
			return "", err
		}
		return "Capability-aware input requests fulfilled", nil
	}))
}

// registerTasks adds the fixtures of the suite's tasks-* scenarios (the
// io.modelcontextprotocol/tasks extension, SEP-2663): tools that run as
// MCP tasks, which the gateway runs and keeps.
func registerTasks(a *core.Agent) {
	type greetIn struct {
		Name string `json:"name" desc:"Who to greet"`
	}
	must(core.AddTool(a, "greet", "Greets someone, at once (never a task)", func(ctx context.Context, in greetIn) (string, error) {
		return fmt.Sprintf("Hello, %s!", in.Name), nil
	}))
	type computeIn struct {
		Seconds float64 `json:"seconds" desc:"How long the computation takes, in seconds"`
		Label   string  `json:"label,omitempty" desc:"A name for the computation"`
	}
	must(core.AddTool(a, "slow_compute", "Computes for the given number of seconds, then answers; may run as a task", func(ctx context.Context, in computeIn) (string, error) {
		core.Progress(ctx, fmt.Sprintf("Computing %s for %gs", in.Label, in.Seconds))
		select {
		case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
		case <-ctx.Done():
			return "", ctx.Err() // cancelled: the task ends cancelled
		}
		return fmt.Sprintf("Computed %s in %gs", in.Label, in.Seconds), nil
	}, core.TaskSupport(core.TaskOptional)))
	must(core.AddTool(a, "failing_job", "Fails with a tool error after about a second; runs only as a task", func(ctx context.Context, _ empty) (string, error) {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "", errors.New("the job failed: the input data is corrupt")
	}, core.TaskSupport(core.TaskRequired)))
	must(core.AddTool(a, "protocol_error_job", "Ends with a JSON-RPC error, not a tool error; may run as a task", func(ctx context.Context, _ empty) (string, error) {
		return "", &core.ProtocolError{Code: core.CodeInternalError, Message: "The job's worker crashed."}
	}, core.TaskSupport(core.TaskOptional)))
	type deleteIn struct {
		Filename string `json:"filename" desc:"The file to delete"`
	}
	must(core.AddTool(a, "confirm_delete", "Asks the user before deleting a file; may run as a task", func(ctx context.Context, in deleteIn) (string, error) {
		ok, err := core.Confirm(ctx, fmt.Sprintf("Delete %s?", in.Filename))
		if err != nil {
			return "", err
		}
		if !ok {
			return fmt.Sprintf("Kept %s.", in.Filename), nil
		}
		return fmt.Sprintf("Deleted %s.", in.Filename), nil
	}, core.TaskSupport(core.TaskOptional)))
	must(core.AddTool(a, "multi_input", "Asks two questions at once; may run as a task", func(ctx context.Context, _ empty) (string, error) {
		r, err := core.Together(ctx, core.Inputs{Elicits: []core.ElicitRequest{
			{Message: "What is your name?", Schema: nameSchema, ID: "name"},
			{Message: "Do you confirm?", Schema: obj(map[string]any{"confirm": map[string]any{"type": "boolean"}}, "confirm"), ID: "confirm"},
		}})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Got %v and confirm=%v", r.Elicits[0].Content["name"], r.Elicits[1].Content["confirm"]), nil
	}, core.TaskSupport(core.TaskOptional)))
	must(core.AddTool(a, "test_tool_with_task", "Asks for the user's name, then runs as a task; runs only as a task", func(ctx context.Context, _ empty) (string, error) {
		r, err := core.Together(ctx, core.Inputs{Elicit: &core.ElicitRequest{Message: "What is your name?", Schema: nameSchema}, ElicitID: "user_name"})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Hello, %v! Your task is done.", r.Elicit.Content["name"]), nil
	}, core.TaskSupport(core.TaskRequired)))
}

func registerResources(a *core.Agent) {
	must(a.Resource("test://static-text", core.ResourceOptions{Name: "static-text", Description: "A static text resource for testing", MimeType: "text/plain"},
		func(ctx context.Context) (any, error) { return "This is the content of the static text resource.", nil }))
	must(a.Resource("test://static-binary", core.ResourceOptions{Name: "static-binary", Description: "A static binary resource (image) for testing", MimeType: "image/png"},
		func(ctx context.Context) (any, error) { return imageData, nil }))
	must(a.ResourceTemplate("test://template/{id}/data", core.ResourceOptions{Name: "template", Description: "A resource template with parameter substitution", MimeType: "application/json"},
		func(ctx context.Context, uri string, params map[string]string) (any, error) {
			return fmt.Sprintf(`{"id": "%s", "templateTest": true, "data": "Data for ID: %s"}`, params["id"], params["id"]), nil
		}))
	must(a.Resource(watchedURI, core.ResourceOptions{Name: "watched-resource", Description: "A resource that auto-updates every 3 seconds", MimeType: "text/plain"},
		func(ctx context.Context) (any, error) { return "Watched resource content", nil }))
}

func registerPrompts(a *core.Agent) {
	must(a.Prompt("test_simple_prompt", core.PromptOptions{Title: "Simple Test Prompt", Description: "A simple prompt without arguments"},
		func(ctx context.Context, _ map[string]string) (core.PromptResult, error) {
			return core.PromptResult{Description: "A simple test prompt", Messages: []core.PromptMessage{core.UserMessage("This is a simple prompt for testing.")}}, nil
		}))
	must(a.Prompt("test_prompt_with_arguments", core.PromptOptions{Title: "Prompt With Arguments", Description: "A prompt with required arguments", Args: []core.PromptArg{
		{Name: "arg1", Description: "First test argument", Required: true},
		{Name: "arg2", Description: "Second test argument", Required: true},
	}}, func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
		return core.PromptResult{Description: "A prompt with arguments", Messages: []core.PromptMessage{
			core.UserMessage(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args["arg1"], args["arg2"])),
		}}, nil
	}))
	must(a.Prompt("test_prompt_with_embedded_resource", core.PromptOptions{Title: "Prompt With Embedded Resource", Description: "A prompt that includes an embedded resource", Args: []core.PromptArg{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
	}}, func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
		return core.PromptResult{Description: "A prompt with an embedded resource", Messages: []core.PromptMessage{
			{Role: "user", Content: core.EmbeddedText(args["resourceUri"], "text/plain", "Embedded resource content for testing.")},
			core.UserMessage("Please process the embedded resource above."),
		}}, nil
	}))
	must(a.Prompt("test_prompt_with_image", core.PromptOptions{Title: "Prompt With Image", Description: "A prompt that includes image content"},
		func(ctx context.Context, _ map[string]string) (core.PromptResult, error) {
			return core.PromptResult{Description: "A prompt with an image", Messages: []core.PromptMessage{
				{Role: "user", Content: core.Image(imageData, "image/png")},
				core.UserMessage("Please analyze the image above."),
			}}, nil
		}))
	must(a.Prompt("test_input_required_result_prompt", core.PromptOptions{Description: "MRTR (SEP-2322): asks for context via an in-band elicitation request"},
		func(ctx context.Context, _ map[string]string) (core.PromptResult, error) {
			r, err := core.Together(ctx, core.Inputs{Elicit: &core.ElicitRequest{Message: "Please provide context for the prompt",
				Schema: obj(map[string]any{"context": map[string]any{"type": "string"}}, "context")}, ElicitID: "user_context"})
			if err != nil {
				return core.PromptResult{}, err
			}
			return core.PromptResult{Description: "A prompt with elicited context", Messages: []core.PromptMessage{core.UserMessage(fmt.Sprintf("Context: %v", r.Elicit.Content["context"]))}}, nil
		}))
}

const jsonSchema202012 = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {
		"address": {
			"$anchor": "addressDef",
			"type": "object",
			"properties": {
				"street": { "type": "string" },
				"city": { "type": "string" }
			}
		}
	},
	"properties": {
		"name": { "type": "string" },
		"address": { "$ref": "#/$defs/address" },
		"contactMethod": { "type": "string", "enum": ["phone", "email"] },
		"phone": { "type": "string" },
		"email": { "type": "string" }
	},
	"allOf": [
		{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }
	],
	"if": {
		"properties": { "contactMethod": { "const": "phone" } },
		"required": ["contactMethod"]
	},
	"then": { "required": ["phone"] },
	"else": { "required": ["email"] },
	"additionalProperties": false
}`
