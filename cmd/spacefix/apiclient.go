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
	"strings"
	"time"
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

// apiFlags adds --url, --token and --project to fs.
func apiFlags(fs *flag.FlagSet) func() (*apiClient, error) {
	base := fs.String("url", envOr("SPACEFIX_URL", "http://127.0.0.1:8080"), "the gateway's base `URL` (env SPACEFIX_URL)")
	token := fs.String("token", "", "an admin API `token` (env SPACEFIX_TOKEN); make one with: spacefix tokens create")
	project := fs.String("project", "default", "the project `name`")
	return func() (*apiClient, error) {
		t := *token
		if t == "" {
			t = envOr("SPACEFIX_TOKEN", "")
		}
		if t == "" {
			return nil, usageError{fs.Name() + ": no admin API token; pass --token or set SPACEFIX_TOKEN (make one with: spacefix tokens create)"}
		}
		u, err := url.Parse(*base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError{fmt.Sprintf("%s: --url %q: want the gateway's base URL, for example http://127.0.0.1:8080", fs.Name(), *base)}
		}
		return &apiClient{
			base: strings.TrimRight(*base, "/"), token: t, project: *project,
			http: &http.Client{Timeout: 30 * time.Second},
		}, nil
	}
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
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
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
