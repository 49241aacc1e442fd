package upstream

import (
	"errors"
	"fmt"
	"net"

	"github.com/spacefix/spacefix/internal/egress"
	"github.com/spacefix/spacefix/internal/oauthclient"
)

// BeginHint tells the gateway's operator what to change when [Service.Begin]
// failed with err for the remote at resource: a flag for an address the
// egress policy refused, the network for a remote it could not reach, the
// remote's set-up for an authorization server that refused. People see
// only that connecting could not start; this goes to the log beside err.
func (s *Service) BeginHint(err error, resource string) string {
	host := oauthclient.Host(resource)
	if h := egress.HintOf(err); h != "" {
		return h
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var refused *oauthclient.Refused
	var ne net.Error
	switch {
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("the gateway cannot resolve %s: check the bridge's --remote URL and the gateway's DNS", dnsErr.Name)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("%s did not answer in time: check that it is up and that the gateway's network reaches it (firewall, proxy)", host)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return fmt.Sprintf("the gateway could not connect to %s: check that the remote is up at the bridge's --remote URL and that the gateway's network reaches it (firewall)", host)
	case errors.As(err, &refused) && refused.Code != "":
		return fmt.Sprintf("the authorization server of %s refused the gateway (%s): check that it allows dynamic client registration and the redirect URI %s", host, refused.Code, s.RedirectURI())
	}
	return fmt.Sprintf("check that %s is an MCP server that asks for OAuth sign-in (a 401 with its protected resource metadata) and that the gateway reaches it", host)
}
