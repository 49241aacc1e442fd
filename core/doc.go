// Package core is the Go SDK for Spacefix agents: it lets the code you already
// run offer tools, resources and prompts to AI agents through a Spacefix
// gateway, over MCP.
//
// An agent registers what it offers, then [Agent.Run] dials out to the
// gateway (so it works behind NAT and firewalls), serves calls concurrently
// and reconnects with backoff until its context ends. Agents import this
// package and nothing else of Spacefix's; it is a module of its own
// (github.com/spacefix/spacefix/core, Go 1.23 or later), so a provider's
// module carries none of the gateway's dependencies.
//
// A tool's argument schema is derived from its input struct: the json tag
// names a field, a field without omitempty is required, and the tags desc,
// enum, default, min, max, minLength, maxLength, pattern, format, minItems and
// maxItems refine it. The gateway validates every call against that schema
// before the handler runs; a default is advertised, not applied. For a
// schema a struct cannot express ($defs and $ref, $anchor, allOf,
// if/then/else), [Agent.RawTool] takes raw JSON Schema (2020-12 unless its
// "$schema" says otherwise), sent to clients unchanged and validated by the
// gateway all the same.
//
//	type SearchOrdersInput struct {
//		Customer string `json:"customer" desc:"Customer handle, for example \"ada\""`
//		Status   string `json:"status,omitempty" desc:"Only orders in this status" enum:"open,shipped,cancelled"`
//		Limit    int    `json:"limit,omitempty" desc:"How many orders to return (1 to 50)" min:"1" max:"50" default:"10"`
//	}
//
//	func main() {
//		agent, err := core.New(core.Options{APIKey: os.Getenv("SPACEFIX_API_KEY")})
//		if err != nil {
//			log.Fatal(err)
//		}
//		must := func(err error) {
//			if err != nil {
//				log.Fatal(err)
//			}
//		}
//		must(core.AddTool(agent, "search_orders",
//			"List orders for a customer, newest first. Returns an empty list when nothing matches.",
//			func(ctx context.Context, in SearchOrdersInput) ([]Order, error) {
//				limit := in.Limit
//				if limit == 0 {
//					limit = 10 // a schema default is advertised, not applied for you
//				}
//				return orderService.Search(in.Customer, in.Status, limit), nil
//			}, core.ReadOnly()))
//		must(agent.Resource("orders://open", core.ResourceOptions{
//			Name:        "Open orders",
//			Description: "Every order that has not shipped yet",
//			MimeType:    "application/json",
//		}, func(ctx context.Context) (any, error) {
//			return orderService.Open(), nil
//		}))
//		must(agent.Prompt("summarise_order", core.PromptOptions{
//			Title:       "Summarise an order",
//			Description: "Write a short, polite summary of an order for a support reply.",
//			Args:        []core.PromptArg{{Name: "id", Description: "The order id", Required: true}},
//		}, func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
//			order, _ := orderService.FindByID(args["id"])
//			b, _ := json.Marshal(order)
//			return core.PromptText("Summarise this order politely, in two sentences:\n" + string(b)), nil
//		}))
//
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//		defer stop()
//		if err := agent.Run(ctx); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// # Results
//
// What a tool handler returns is what the model reads: a string is sent as
// text, nil as null, a [ToolResult] as it is (see [TextResult],
// [ErrorResult], [ImageResult]), a plain value (a map, an any) whose JSON
// is an object with a "content" array of MCP content parts as it is too,
// and any other value as its JSON. A handler
// whose output type is a struct also advertises an outputSchema and sends
// the object as structuredContent. A returned error reaches the model as a
// result with isError and the error's message only; a panic is recovered
// and sent as "panic: <value>". Rarely, a handler must fail the client's
// request itself, with a JSON-RPC error the client handles: it returns a
// [ProtocolError].
//
// # Slow tools
//
// [TaskSupport] declares that MCP clients may run a tool as a task
// ([TaskOptional]) or only as one ([TaskRequired]): the client gets a task
// at once and fetches the result when the handler returns.
//
// # Repeat-safe writes
//
// Models retry a write after a timeout or a dropped connection. A tool that
// takes a request id names it with [IdempotencyKey], and the gateway makes
// repeats of one id safe in its own store: a repeat of a call that ended
// gets the first result without reaching the handler, a repeat of a
// running call waits for it, and the same id with other arguments is
// refused. The handler runs at most once per delivery; the gateway
// delivers an id again only after an unknown outcome (a timeout, or an
// agent that went away before answering), and then [Call.RetryOf] and
// [Call.RetryReason] say so, for the handler to look for the earlier
// call's write first.
//
// # Calls
//
// Every call runs in its own goroutine. Its context ends when the client
// cancels, at the call's deadline (the tool's [Timeout], else the
// project's call wait; for a call run as a task or a job, the project's
// longest task), when the connection drops and when Run's context ends. Inside a handler,
// [Progress] sends a short line to the client and [CallFrom] says who is
// calling.
package core
