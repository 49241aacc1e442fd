package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spacefix/spacefix/core"
)

// Order and orderService stand for the service code an agent already has.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Status   string `json:"status"`
	Total    int    `json:"total"`
}

type orders struct{}

var orderService orders

func (orders) FindByID(id string) (Order, bool)                   { return Order{ID: id}, id != "" }
func (orders) Search(customer, status string, limit int) []Order  { return []Order{} }
func (orders) Create(requestID, customer string, total int) Order { return Order{ID: requestID} }
func (orders) FindByRequest(id string) (Order, bool)              { return Order{}, false }
func (orders) Open() []Order                                      { return []Order{} }

type GetOrderInput struct {
	ID string `json:"id" desc:"The order id, for example \"1042\""`
}
type SearchOrdersInput struct {
	Customer string `json:"customer" desc:"Customer handle, for example \"ada\""`
	Status   string `json:"status,omitempty" desc:"Only orders in this status" enum:"open,shipped,cancelled"`
	Limit    int    `json:"limit,omitempty" desc:"How many orders to return (1 to 50)" min:"1" max:"50" default:"10"`
}
type CreateOrderInput struct {
	RequestID string `json:"requestId" desc:"A unique id for this attempt, for example a UUID. Reuse it when retrying."`
	Customer  string `json:"customer"`
	Total     int    `json:"total" desc:"Total in cents"`
}

// The orders agent, whole in examples/orders: three tools, a resource
// and a prompt.
func Example() {
	agent, err := core.New(core.Options{APIKey: os.Getenv("SPACEFIX_API_KEY")})
	if err != nil {
		log.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	must(core.AddTool(agent, "get_order",
		"Look up one order by its id. Returns the order, or an error if no order has that id. "+
			"To find orders by customer, use search_orders instead.",
		func(ctx context.Context, in GetOrderInput) (Order, error) {
			order, ok := orderService.FindByID(in.ID)
			if !ok {
				return Order{}, fmt.Errorf("no order with id %s: ask the user to confirm the id, or use search_orders", in.ID)
			}
			return order, nil
		}))
	must(core.AddTool(agent, "search_orders",
		"List orders for a customer, newest first. Returns an empty list when nothing matches.",
		func(ctx context.Context, in SearchOrdersInput) ([]Order, error) {
			limit := in.Limit
			if limit == 0 {
				limit = 10 // a schema default is advertised, not applied for you
			}
			return orderService.Search(in.Customer, in.Status, limit), nil
		}))
	must(core.AddTool(agent, "create_order",
		"Create an order. Always pass the same requestId when retrying, so the order is created only once.",
		func(ctx context.Context, in CreateOrderInput) (Order, error) {
			return orderService.Create(in.RequestID, in.Customer, in.Total), nil
		}, core.IdempotencyKey("requestId")))
	must(agent.Resource("orders://open", core.ResourceOptions{
		Name:        "Open orders",
		Description: "Every order that has not shipped yet",
		MimeType:    "application/json",
	}, func(ctx context.Context) (any, error) {
		return orderService.Open(), nil
	}))
	must(agent.Prompt("summarise_order", core.PromptOptions{
		Title:       "Summarise an order",
		Description: "Write a short, polite summary of an order for a support reply.",
		Args:        []core.PromptArg{{Name: "id", Description: "The order id", Required: true}},
	}, func(ctx context.Context, args map[string]string) (core.PromptResult, error) {
		order, _ := orderService.FindByID(args["id"])
		b, _ := json.Marshal(order)
		return core.PromptText("Summarise this order politely, in two sentences:\n" + string(b)), nil
	}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A tool that only reads, marked so read-only clients may call it, with its
// own call timeout: the gateway waits up to a minute, and the handler's
// context ends when it stops waiting.
func ExampleAddTool() {
	agent, err := core.New(core.Options{APIKey: "sfx_agent_example", Name: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	err = core.AddTool(agent, "export_orders",
		"Export a customer's orders as CSV text. Takes up to a minute for large customers.",
		func(ctx context.Context, in struct {
			Customer string `json:"customer" desc:"Customer handle"`
		}) (string, error) {
			core.Progress(ctx, "reading orders")
			return "id,total\n1042,1999\n", ctx.Err()
		},
		core.ReadOnly(), core.Idempotent(), core.Title("Export orders"),
		core.Timeout(60*time.Second))
	fmt.Println(err)
	// Output: <nil>
}

// A write the gateway makes safe to repeat: a repeat of one requestId gets
// the first result without running the handler again. Only after an unknown
// outcome (the earlier call timed out, or the agent went away before
// answering) does the handler run again, and then it looks for the order
// the earlier call may have created.
func ExampleIdempotencyKey() {
	agent, err := core.New(core.Options{APIKey: "sfx_agent_example", Name: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	err = core.AddTool(agent, "create_order",
		"Create an order. Always pass the same requestId when retrying, so the order is created only once.",
		func(ctx context.Context, in CreateOrderInput) (Order, error) {
			if call, _ := core.CallFrom(ctx); call.RetryOf != "" {
				// Call call.RetryOf timed out or was cut off: it may have
				// created the order already.
				if order, ok := orderService.FindByRequest(in.RequestID); ok {
					return order, nil
				}
			}
			return orderService.Create(in.RequestID, in.Customer, in.Total), nil
		}, core.IdempotencyKey("requestId"))
	fmt.Println(err)
	// Output: <nil>
}

// A result of several parts: an image with a caption.
func ExampleImageResult() {
	png := []byte{0x89, 'P', 'N', 'G'}
	r := core.ImageResult(png, "image/png", "The order's barcode")
	fmt.Println(len(r.Content), r.Content[0].Type, r.Content[1].Text)
	// Output: 2 image The order's barcode
}

// A prompt that starts with an exchange rather than one message.
func ExamplePromptResult() {
	r := core.PromptResult{Messages: []core.PromptMessage{
		core.UserMessage("Summarise order 1042."),
		core.AssistantMessage("Order 1042 shipped on Monday; it holds two items."),
	}}
	fmt.Println(len(r.Messages), r.Messages[1].Role)
	// Output: 2 assistant
}

// Who is calling, and until when. A person who connected an app through
// OAuth comes with Person and App; a client key with neither.
func ExampleCallFrom() {
	handler := func(ctx context.Context, in struct{}) (string, error) {
		call, ok := core.CallFrom(ctx)
		if !ok {
			return "", fmt.Errorf("not inside a call")
		}
		if call.Person == nil {
			return "", fmt.Errorf("sign in through an app to see your orders; key %s speaks for no one person", call.KeyName)
		}
		return fmt.Sprintf("hello %s (%s) via %s, call %s ends at %s",
			call.Person.Name, call.Person.Email, call.App.Name, call.ID, call.Deadline.Format(time.RFC3339)), nil
	}
	_ = handler
}

// Turning a tool off while the agent runs, for example when a dependency is
// down; every replica's tool disappears from clients until it is back.
func ExampleAgent_SetEnabled() {
	agent, err := core.New(core.Options{APIKey: "sfx_agent_example"})
	if err != nil {
		log.Fatal(err)
	}
	_ = core.AddTool(agent, "pay_invoice", "Pay an invoice.",
		func(ctx context.Context, in struct {
			ID string `json:"id"`
		}) (string, error) {
			return "paid", nil
		}, core.Destructive())
	fmt.Println(agent.SetEnabled("pay_invoice", false))
	// Output: <nil>
}

// A tool whose input schema is raw JSON Schema 2020-12: a transfer needs
// an IBAN, a card payment a card number. Clients see the schema as
// written; the gateway validates every call against it before the handler
// runs, so the handler only decodes.
func ExampleAgent_RawTool() {
	agent, err := core.New(core.Options{APIKey: "sfx_agent_example"})
	if err != nil {
		log.Fatal(err)
	}
	schema := json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"$defs": {"amount": {"type": "number", "exclusiveMinimum": 0}},
		"properties": {
			"kind": {"enum": ["card", "transfer"]},
			"amount": {"$ref": "#/$defs/amount"},
			"iban": {"type": "string"},
			"card": {"type": "string", "minLength": 12}
		},
		"required": ["kind", "amount"],
		"if": {"properties": {"kind": {"const": "transfer"}}},
		"then": {"required": ["iban"]},
		"else": {"required": ["card"]},
		"additionalProperties": false
	}`)
	err = agent.RawTool("pay", "Pay an amount by card or bank transfer. Returns the payment id.", schema,
		func(ctx context.Context, args json.RawMessage) (any, error) {
			var in struct {
				Kind   string  `json:"kind"`
				Amount float64 `json:"amount"`
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			return fmt.Sprintf("payment p-1: %s of %.2f", in.Kind, in.Amount), nil
		})
	fmt.Println(err)
	// Output: <nil>
}
