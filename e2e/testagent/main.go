// Command testagent is a small agent the end-to-end tests run as a real
// process, so they can kill it or restart it like a deployment would.
//
// It reads SPACEFIX_API_KEY and SPACEFIX_URL, and TESTAGENT_INSTANCE for
// its instance name. It prints "ready" once connected... (the tests watch
// the gateway's registry instead).
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spacefix/spacefix/core"
)

type WorkInput struct {
	Ms  int    `json:"ms" min:"0" max:"60000" desc:"How long to work, in milliseconds"`
	Tag string `json:"tag,omitempty"`
}

type Empty struct{}

func main() {
	instance := os.Getenv("TESTAGENT_INSTANCE")
	a, err := core.New(core.Options{
		Name:     "testagent",
		Instance: instance,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		log.Fatal(err)
	}
	pid := os.Getpid()
	must(core.AddTool(a, "work", "Works for ms milliseconds, then says who did it.",
		func(ctx context.Context, in WorkInput) (string, error) {
			select {
			case <-time.After(time.Duration(in.Ms) * time.Millisecond):
				return fmt.Sprintf("done %s by %d", in.Tag, pid), nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}, core.ReadOnly()))
	must(core.AddTool(a, "hang", "Never returns on its own.",
		func(ctx context.Context, in Empty) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
