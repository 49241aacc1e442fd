// Command identity is an agent whose tool passes the caller's identity
// token on to "its own backend", which trusts the token, not the agent:
// it verifies the signature against the gateway's JWKS, then iss, aud and
// exp with a leeway of 5 seconds (verify.go). Here the backend runs in the
// same process; in real life it is another service, which gets the token
// as is.
//
// The agent key must ask for identity tokens first (docs/identity.md):
//
//	spacefix keys set KEY_ID --identity-audience https://orders.example.com
//	SPACEFIX_API_KEY=sfx_agent_… SPACEFIX_URL=http://127.0.0.1:8080 go run ./examples/identity
//
// IDENTITY_AUDIENCE is the audience the backend expects (default
// https://orders.example.com); IDENTITY_ISSUER the gateway's public URL,
// the tokens' iss (default SPACEFIX_URL, else http://127.0.0.1:8080).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spacefix/spacefix/core"
)

func main() {
	backend := &Verifier{
		Issuer:   env("IDENTITY_ISSUER", env("SPACEFIX_URL", "http://127.0.0.1:8080")),
		Audience: env("IDENTITY_AUDIENCE", "https://orders.example.com"),
	}
	a, err := core.New(core.Options{Name: "identity"})
	if err != nil {
		log.Fatal(err)
	}
	err = core.AddTool(a, "whoami", "Says who is calling, as the service's own backend verified it.",
		func(ctx context.Context, _ struct{}) (string, error) { return whoami(ctx, backend) }, core.ReadOnly())
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// whoami hands the call's identity token to the backend and says what the
// backend made of it.
func whoami(ctx context.Context, backend *Verifier) (string, error) {
	call, _ := core.CallFrom(ctx)
	if call.IdentityToken == "" {
		return "", errors.New("this call carries no identity token: give the agent key an identity audience (spacefix keys set KEY_ID --identity-audience AUDIENCE)")
	}
	c, err := backend.Verify(ctx, call.IdentityToken, time.Now())
	if err != nil {
		return "", fmt.Errorf("the backend refused the identity token: %w", err)
	}
	who := c.Subject
	if c.Email != "" {
		who += " (" + c.Email + ")"
	}
	return fmt.Sprintf("caller %s in project %s, scopes %q", who, c.Project, c.Scope), nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
