package main

import (
	"strings"
	"testing"
)

// TestIdPCommands: idp add, list and remove on the store, with the
// mistakes an admin makes answered by what to type instead, and both
// changes in the audit log.
func TestIdPCommands(t *testing.T) { eachStore(t, testIdPCommands) }

func testIdPCommands(t *testing.T, data string) {
	if _, err := runCLI(t, "projects", "create", "shop", "--data", data); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "idp", "add", "--data", data, "--issuer", "https://acme.okta.com",
		"--allowed-client", "client_a", "--allowed-client", "https://app.example.com/client.json", "--provision", "shop:viewer")
	if err != nil || out != "Trusted https://acme.okta.com. MCP clients may now present its ID-JAGs at /oauth/token (grant_type urn:ietf:params:oauth:grant-type:jwt-bearer).\n"+
		"Its people reach project shop; people the gateway does not know yet join it as viewer.\n" {
		t.Errorf("idp add = %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"idp", "add", "--data", data, "--issuer", "https://acme.okta.com"}, "https://acme.okta.com is trusted already; remove it first to change it: spacefix idp remove https://acme.okta.com"},
		{[]string{"idp", "add", "--data", data}, "idp add: --issuer URL is required, e.g. --issuer https://acme.okta.com"},
		{[]string{"idp", "add", "--data", data, "--issuer", "ftp://idp.example"}, `idp add: issuer "ftp://idp.example" must use https (http only on a loopback address, for tests).`},
		{[]string{"idp", "add", "--data", data, "--issuer", "https://idp.example", "--provision", "shop"}, `idp add: --provision wants PROJECT:ROLE, e.g. --provision shop:viewer, not "shop"`},
		{[]string{"idp", "add", "--data", data, "--issuer", "https://idp.example", "--provision", "nope:viewer"}, `no project "nope"; see spacefix projects list`},
		{[]string{"idp", "add", "--data", data, "--issuer", "https://idp.example", "--provision", "shop:boss"}, `idp add: provision role "boss" is not one of viewer, editor, owner.`},
		{[]string{"idp", "remove", "https://nope.example", "--data", data}, "no trusted identity provider https://nope.example; see spacefix idp list"},
	} {
		if _, err := runCLI(t, c.args...); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v; want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	out, err = runCLI(t, "idp", "list", "--data", data)
	if err != nil || !strings.Contains(out, "https://acme.okta.com") || !strings.Contains(out, "client_a,https://app.example.com/client.json") || !strings.Contains(out, "shop:viewer") {
		t.Errorf("idp list = %v\n%s", err, out)
	}
	if out, err := runCLI(t, "idp", "list", "--data", data, "--json"); err != nil || !strings.Contains(out, `"provision": "shop:viewer"`) {
		t.Errorf("idp list --json = %v\n%s", err, out)
	}
	if out, err := runCLI(t, "idp", "remove", "https://acme.okta.com", "--data", data); err != nil ||
		out != "Removed https://acme.okta.com. Its ID-JAGs are refused from now on; tokens already issued run out within the hour.\n" {
		t.Errorf("idp remove = %v\n%s", err, out)
	}
	if out, err := runCLI(t, "idp", "list", "--data", data); err != nil || out != "No trusted identity providers. Add one with: spacefix idp add --issuer URL\n" {
		t.Errorf("idp list, empty = %v\n%s", err, out)
	}
	if out, err := runCLI(t, "audit", "list", "--data", data); err != nil || !strings.Contains(out, "idp.add") || !strings.Contains(out, "idp.remove") {
		t.Errorf("audit list = %v\n%s", err, out)
	}
}
