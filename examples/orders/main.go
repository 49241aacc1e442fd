// Command orders is the complete orders example of the Go SDK: an
// agent that offers three tools, a resource and a prompt over a small order
// service of its own; and a slow fourth tool, sales_report, that runs as an
// MCP task (report.go, docs/tasks.md).
//
//	SPACEFIX_API_KEY=sfx_agent_… go run ./examples/orders
//
// ORDERS_DB names the SQLite file the service keeps its orders in (default
// orders.db in the working directory); ORDERS_REPORT_SECONDS how long
// sales_report takes (default 45).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/spacefix/spacefix/core"
)

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

func main() {
	path := os.Getenv("ORDERS_DB")
	if path == "" {
		path = "orders.db"
	}
	orderService, err := OpenOrderService(path)
	if err != nil {
		log.Fatal(err)
	}
	defer orderService.Close()

	agent, err := core.New(core.Options{APIKey: os.Getenv("SPACEFIX_API_KEY"), Name: "orders"})
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
		}, core.ReadOnly()))

	must(core.AddTool(agent, "search_orders",
		"List orders for a customer, newest first. Returns an empty list when nothing matches.",
		func(ctx context.Context, in SearchOrdersInput) ([]Order, error) {
			limit := in.Limit
			if limit == 0 {
				limit = 10 // a schema default is advertised, not applied for you
			}
			return orderService.Search(in.Customer, in.Status, limit), nil
		}, core.ReadOnly()))

	// The gateway makes create_order safe to repeat (IdempotencyKey): a
	// repeat of one requestId gets the first call's result without reaching
	// this handler. The one repeat it delivers again is one after an unknown
	// outcome: the earlier call timed out, or this agent went away before
	// answering, so the order may exist already.
	must(core.AddTool(agent, "create_order",
		"Create an order. Always pass the same requestId when retrying, so the order is created only once.",
		func(ctx context.Context, in CreateOrderInput) (Order, error) {
			if call, _ := core.CallFrom(ctx); call.RetryOf != "" {
				if order, ok := orderService.FindByRequest(in.RequestID); ok {
					return order, nil
				}
			}
			return orderService.Create(in.RequestID, in.Customer, in.Total)
		}, core.Idempotent(), core.IdempotencyKey("requestId")))

	must(addSalesReport(agent, orderService)) // the slow tool: report.go

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
