package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spacefix/spacefix/internal/gateway"
	"github.com/spacefix/spacefix/internal/store"
)

// gatewaysCmd lists the gateways alive on the store: what an operator of
// several gateways looks at first.
func gatewaysCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if _, err := subcommand("gateways", args, "list"); err != nil {
		return err
	}
	fs := newFlagSet("gateways "+args[0], stdout)
	data := dataFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	return withStore(ctx, *data, func(st store.Store) error {
		gws, err := st.Gateways(ctx, time.Now().Add(-gateway.Lost()))
		if err != nil {
			return err
		}
		if *asJSON {
			type out struct {
				ID        string    `json:"id"`
				Addr      string    `json:"addr"`
				Host      string    `json:"host"`
				PID       int       `json:"pid"`
				Bus       bool      `json:"bus"`
				StartedAt time.Time `json:"startedAt"`
				SeenAt    time.Time `json:"seenAt"`
			}
			list := make([]out, 0, len(gws))
			for _, g := range gws {
				list = append(list, out{g.ID, g.Addr, g.Host, g.PID, g.Bus, g.StartedAt, g.SeenAt})
			}
			return json.NewEncoder(stdout).Encode(list)
		}
		if len(gws) == 0 {
			fmt.Fprintf(stdout, "No gateway is running on this store (none recorded itself in the last %s).\n", gateway.Lost())
			return nil
		}
		t := newTable(stdout, "ID", "ADDRESS", "HOST", "PID", "BUS", "STARTED", "LAST SEEN")
		for _, g := range gws {
			bus := "no"
			if g.Bus {
				bus = "yes"
			}
			t.row(g.ID, g.Addr, g.Host, fmt.Sprint(g.PID), bus,
				g.StartedAt.Local().Format(time.DateTime), fmt.Sprintf("%s ago", time.Since(g.SeenAt).Round(time.Second)))
		}
		return t.flush()
	})
}
