package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spacefix/spacefix/core"
)

// The slow tool of the example: a report that takes about 45 seconds. It
// declares task support, so the gateway runs it as a task: a client that
// speaks MCP tasks gets a task to poll, and any other client gets, at the
// project's call wait, a job id to pass to the gateway's spacefix_job tool
// (docs/tasks.md). Its progress lines become the task's status message.

// SalesReportInput is what sales_report takes.
type SalesReportInput struct {
	Status string `json:"status,omitempty" desc:"Only orders in this status" enum:"open,shipped,cancelled"`
}

// SalesReport is what sales_report returns.
type SalesReport struct {
	Orders   int            `json:"orders"`
	Total    int            `json:"total" desc:"Total in cents"`
	ByStatus map[string]int `json:"byStatus" desc:"Order count per status"`
}

// reportSteps is how many progress lines the report says.
const reportSteps = 9

// reportDuration is how long the report takes: 45 s, or ORDERS_REPORT_SECONDS
// (the example's tests make it short).
func reportDuration() time.Duration {
	if s, err := strconv.ParseFloat(os.Getenv("ORDERS_REPORT_SECONDS"), 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	return 45 * time.Second
}

func addSalesReport(agent *core.Agent, orders *OrderService) error {
	took := reportDuration()
	return core.AddTool(agent, "sales_report",
		"Build the sales report: how many orders, their total and the count per status. "+
			"Slow: it takes about 45 seconds.",
		func(ctx context.Context, in SalesReportInput) (SalesReport, error) {
			all := orders.All(in.Status)
			report := SalesReport{ByStatus: map[string]int{}}
			for step := 1; step <= reportSteps; step++ {
				// Stands for the slow part: a query over a year of orders.
				select {
				case <-time.After(took / reportSteps):
				case <-ctx.Done():
					return SalesReport{}, ctx.Err() // cancelled: stop working
				}
				core.Progress(ctx, fmt.Sprintf("Counted %d of %d months", step*12/reportSteps, 12))
			}
			for _, o := range all {
				report.Orders++
				report.Total += o.Total
				report.ByStatus[o.Status]++
			}
			return report, nil
		}, core.ReadOnly(), core.TaskSupport(core.TaskOptional))
}
