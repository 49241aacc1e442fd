package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/users"
)

// usersCmd manages dashboard users on the store file.
func usersCmd(ctx context.Context, args []string, stdout io.Writer) error {
	if _, err := subcommand("users", args, "list", "setup-link"); err != nil {
		return err
	}
	fs := newFlagSet("users "+args[0], stdout)
	data := dataFlag(fs)
	base := fs.String("url", "", "the gateway's base `URL`, to print links with (env SPACEFIX_URL; default: the address serve last used with --data, else "+defaultURL+")")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "list":
		return withStore(ctx, *data, func(st store.Store) error {
			us, err := st.Users(ctx)
			if err != nil {
				return err
			}
			t := newTable(stdout, "EMAIL", "ROLE", "SINCE")
			for _, u := range us {
				role := "member"
				if u.Admin {
					role = "admin"
				}
				t.row(u.Email, role, u.CreatedAt.Format(time.DateTime))
			}
			return t.flush()
		})
	default: // "setup-link"; subcommand checked the name
		return withStore(ctx, *data, func(st store.Store) error {
			path, err := users.SetupPath(ctx, st)
			if err != nil {
				return err
			}
			if path == "" {
				return fmt.Errorf("the dashboard has users already; ask an admin for an invite (Users and tokens page)")
			}
			b := cmp.Or(*base, os.Getenv("SPACEFIX_URL"))
			if b == "" {
				b = defaultURL
				if v, err := st.Meta(ctx, store.MetaServeURL); err == nil && v != "" {
					b = v
				}
			}
			fmt.Fprintf(stdout, "Open this link within 24 hours to set the first admin's password (it works once):\n\n  %s%s\n", strings.TrimRight(b, "/"), path)
			return nil
		})
	}
}
