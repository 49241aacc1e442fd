// Command chart is an example agent that shows progress, cancellation and
// images: plot_bars renders a bar chart PNG from numbers, reporting progress
// as it draws and stopping when the caller cancels.
//
//	SPACEFIX_API_KEY=sfx_agent_… go run ./examples/chart
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spacefix/spacefix/core"
)

// PlotInput is what plot_bars takes.
type PlotInput struct {
	Title  string    `json:"title,omitempty" desc:"A caption for the chart" maxLength:"100"`
	Values []float64 `json:"values" desc:"The bar heights, left to right" minItems:"1" maxItems:"64"`
	// Delay slows drawing down so progress and cancellation can be seen.
	DelayMs int `json:"delayMs,omitempty" desc:"Milliseconds to spend on each bar (0 to 2000)" min:"0" max:"2000"`
}

func main() {
	agent, err := core.New(core.Options{APIKey: os.Getenv("SPACEFIX_API_KEY"), Name: "chart"})
	if err != nil {
		log.Fatal(err)
	}
	err = core.AddTool(agent, "plot_bars",
		"Draw a bar chart of the given values and return it as a PNG image, with the title as its caption. "+
			"Use it when the user asks to see numbers as a chart.",
		func(ctx context.Context, in PlotInput) (core.ToolResult, error) {
			png, err := drawBars(ctx, in.Values, time.Duration(in.DelayMs)*time.Millisecond,
				func(msg string) { core.Progress(ctx, msg) })
			if err != nil {
				return core.ToolResult{}, err
			}
			return core.ImageResult(png, "image/png", in.Title), nil
		}, core.ReadOnly(), core.Idempotent(), core.Timeout(2*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
