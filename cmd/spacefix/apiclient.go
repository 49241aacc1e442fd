package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/dashboard/apitypes"
	"github.com/spacefix/spacefix/internal/store"
	"github.com/spacefix/spacefix/internal/store/postgres"
)

// apiClient talks to a running gateway's admin API, for the commands that
// change what a gateway does now (tools, settings): the gateway applies the
// change on its next MCP request, which writing the store file would not do.
type apiClient struct {
	base    string
	token   string
	project string
	http    *http.Client
}

// apiFlags adds --url, --token, --project and --data to fs.
func apiFlags(fs *flag.FlagSet) func() (*apiClient, error) {
	base := fs.String("url", "", "the gateway's base `URL` (env SPACEFIX_URL; default: the address serve last used with --data, else "+defaultURL+")")
	token := fs.String("token", "", "an admin API `token` (env SPACEFIX_TOKEN); make one with: spacefix tokens create")
	project := fs.String("project", "default", "the project `name`")
	data := dataFlag(fs)
	return func() (*apiClient, error) {
		t := *token
		if t == "" {
			t = envOr("SPACEFIX_TOKEN", "")
		}
		if t == "" {
			return nil, usageError{fs.Name() + ": no admin API token; pass --token or set SPACEFIX_TOKEN (make one with: spacefix tokens create)"}
		}
		b := gatewayURL(*base, *data)
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError{fmt.Sprintf("%s: --url %q: want the gateway's base URL, for example http://127.0.0.1:8080", fs.Name(), b)}
		}
		return &apiClient{
			base: strings.TrimRight(b, "/"), token: t, project: *project,
			http: &http.Client{Timeout: 30 * time.Second},
		}, nil
	}
}

const defaultURL = "http://127.0.0.1:8080"

// gatewayURL picks the gateway to talk to: --url, else SPACEFIX_URL, else
// the address serve last listened on with the store file, else defaultURL.
// A store file that does not exist is not created.
func gatewayURL(flagURL, dataPath string) string {
	if flagURL != "" {
		return flagURL
	}
	if v := os.Getenv("SPACEFIX_URL"); v != "" {
		return v
	}
	if _, err := os.Stat(dataPath); err != nil && !postgres.IsURL(dataPath) {
		return defaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := openStore(ctx, dataPath)
	if err != nil {
		return defaultURL
	}
	defer st.Close()
	if v, err := st.Meta(ctx, store.MetaServeURL); err == nil && v != "" {
		return v
	}
	return defaultURL
}

// projectPath is the API path of something in the client's project.
func (c *apiClient) projectPath(format string, args ...any) string {
	return "/api/projects/" + url.PathEscape(c.project) + fmt.Sprintf(format, args...)
}

// do sends a request and decodes a JSON answer into out; an error answer
// becomes an error carrying the gateway's message.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("reach the gateway at %s: %w; is spacefix serve running there?", c.base, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("read the gateway's answer: %w", err)
	}
	if res.StatusCode >= 300 {
		var e apitypes.Error
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			if res.StatusCode == http.StatusNotFound && strings.HasPrefix(e.Error, "There is no project") && path != "/api/projects" {
				return errors.New(e.Error + c.projectList(ctx))
			}
			return errors.New(e.Error)
		}
		return fmt.Errorf("the gateway answered %s; is %s a Spacefix gateway?", res.Status, c.base)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = b
		return nil
	}
	return json.Unmarshal(b, out)
}

// printJSON writes an API answer indented.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	m := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { m[f.Name] = true })
	return m
}

// projectList names the projects the token may act on, for an error about
// a project that is not one of them: " Projects: a, b." (or "" if they
// cannot be listed).
func (c *apiClient) projectList(ctx context.Context) string {
	var ps []apitypes.Project
	if err := c.do(ctx, "GET", "/api/projects", nil, &ps); err != nil || len(ps) == 0 {
		return ""
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return " Projects: " + strings.Join(names, ", ") + " (--project NAME)."
}
