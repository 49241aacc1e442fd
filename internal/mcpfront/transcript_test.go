package mcpfront_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"
)

// The transcripts in testdata/transcripts/{2025,2026} are what an MCP
// client sends and reads, per protocol era, played against the endpoint
// (transcriptEnv) and compared byte for byte once ids and times are
// normalized. A protocol change, or a change of any message a client
// reads, shows as a diff here.
//
// Each file is a txtar archive. Its comment says what the case holds; then
// come pairs of sections:
//
//	-- request: LABEL --
//	POST                      (or GET, DELETE; "POST until TEXT" sends
//	Header: value              again until the raw answer contains TEXT;
//	                           "POST open" and "REST": see exchange)
//	                          (a blank line)
//	{"jsonrpc":"2.0",...}     (the body, if any)
//	-- response: LABEL --
//	200 OK
//	Content-Type: ...          (only the headers in transcriptHeaders)
//
//	event: message            (the body as sent: JSON, or SSE events)
//	data: {...}
//
// The runner adds Authorization (a client key of the project, one per
// transcript, so that none sees another's tasks or request ids),
// Content-Type and Accept to each request. Values that differ from run to
// run, or that only the endpoint's own numbering decides, are written as
// placeholders, <session-1>, <task-1>, <state-1>, <request-1> (the id of
// a request the endpoint sends the client), <time>: a response's value
// gets the next number of its kind (a job id in a text is a task's), and
// a request that names the placeholder sends the value back. Response sections are written by the runner: run with
// -update to write them anew, then read the diff.

var update = flag.Bool("update", false, "write the transcripts' response sections from what the endpoint answers")

// transcriptHeaders are the response headers a transcript shows, in order.
var transcriptHeaders = []string{"Content-Type", "Mcp-Session-Id"}

// TestTranscripts plays every transcript of both eras against one endpoint.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "transcripts", "*", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts (%v)", err)
	}
	e := newTranscriptEnv(t)
	for _, file := range files {
		name := filepath.Base(filepath.Dir(file)) + "/" + strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) { e.play(t, file) })
	}
}

// player plays one transcript: its placeholders, and the response
// stream a request left open ("POST open"), until "REST" reads the rest.
type player struct {
	e      *transcriptEnv
	bearer string // the transcript's own client key
	ids    *placeholders
	open   *openStream
}

// openStream is a response whose reading stopped at a question the
// endpoint asked the client.
type openStream struct {
	label  string
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// play plays one transcript and compares it with the file, or rewrites
// the file under -update.
func (e *transcriptEnv) play(t *testing.T, file string) {
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ar := txtar.Parse(want)
	got := &txtar.Archive{Comment: ar.Comment}
	p := &player{e: e, bearer: e.newKey(t), ids: newPlaceholders()}
	defer p.close()
	for _, f := range ar.Files {
		label, ok := strings.CutPrefix(f.Name, "request: ")
		if !ok {
			if !strings.HasPrefix(f.Name, "response: ") {
				t.Fatalf("section %q: want request: LABEL or response: LABEL", f.Name)
			}
			continue // written anew below
		}
		got.Files = append(got.Files, f,
			txtar.File{Name: "response: " + label, Data: p.exchange(t, label, string(f.Data))})
	}
	if p.open != nil {
		t.Fatalf("%s: the stream of %q is left open: end the transcript with a REST section", file, p.open.label)
	}
	out := txtar.Format(got)
	if *update {
		if err := os.WriteFile(file, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if d := cmp.Diff(string(want), string(out)); d != "" {
		t.Errorf("%s (-file +endpoint; go test -run TestTranscripts -update rewrites it):\n%s", file, d)
	}
}

func (p *player) close() {
	if p.open != nil {
		p.open.resp.Body.Close()
		p.open.cancel()
		p.open = nil
	}
}

// exchange sends the request of one section and returns the response as
// the transcript writes it. The section's first line is the HTTP method;
// "POST until TEXT" sends again until the raw answer contains TEXT; "POST
// open" reads the answer only up to the first request the endpoint sends
// the client (an SSE event with a method and an id), so that the next
// sections can answer it; "REST" reads the rest of that answer.
func (p *player) exchange(t *testing.T, label, section string) []byte {
	t.Helper()
	head, body, _ := strings.Cut(p.ids.fill(section), "\n\n")
	lines := strings.Split(strings.TrimRight(head, "\n"), "\n")
	switch lines[0] {
	case "REST":
		if p.open == nil {
			t.Fatalf("%s: REST, and no stream is open", label)
		}
		raw, err := io.ReadAll(p.open.r)
		if err != nil {
			t.Fatalf("%s: read the rest of %q: %v", label, p.open.label, err)
		}
		p.close()
		return p.ids.body(raw)
	case "POST open":
		if p.open != nil {
			t.Fatalf("%s: the stream of %q is still open", label, p.open.label)
		}
		resp, cancel := p.e.do(t, p.bearer, "POST", lines[1:], strings.TrimSpace(body))
		o := &openStream{label: label, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
		p.open = o
		raw, err := readToRequest(o.r)
		if err != nil {
			t.Fatalf("%s: no request from the endpoint (%v); read:\n%s", label, err, raw)
		}
		return p.ids.response(resp, raw)
	}
	method, until, _ := strings.Cut(lines[0], " until ")
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, cancel := p.e.do(t, p.bearer, method, lines[1:], strings.TrimSpace(body))
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("%s: read the answer: %v", label, err)
		}
		if until == "" || bytes.Contains(raw, []byte(until)) {
			return p.ids.response(resp, raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no answer contained %q within 10s; the last:\n%s", label, until, raw)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval, bounded by the deadline
	}
}

// readToRequest reads SSE events from r up to and including the first one
// that is a request to the client.
func readToRequest(r *bufio.Reader) ([]byte, error) {
	var out []byte
	request := false
	for {
		line, err := r.ReadBytes('\n')
		out = append(out, line...)
		if err != nil {
			return out, err
		}
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && bytes.Contains(d, []byte(`"method":`)) && bytes.Contains(d, []byte(`"id":`)) {
			request = true
		}
		if request && len(bytes.TrimSpace(line)) == 0 {
			return out, nil
		}
	}
}

// do makes one HTTP request to the endpoint and returns its response, to
// be read and closed, and the cancel of its context.
func (e *transcriptEnv) do(t *testing.T, bearer, method string, headers []string, body string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, method, e.url, strings.NewReader(body))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			cancel()
			t.Fatalf("header line %q: want Name: value", h)
		}
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return resp, cancel
}

// placeholders maps the values of one transcript that differ from run to
// run to their placeholders, and back.
type placeholders struct {
	of    map[string]string // value → placeholder
	value map[string]string // placeholder → value
	n     map[string]int    // per kind, the last number given
}

func newPlaceholders() *placeholders {
	return &placeholders{of: map[string]string{}, value: map[string]string{}, n: map[string]int{}}
}

// name returns the placeholder of a value of kind, giving it one if new.
func (p *placeholders) name(kind, value string) string {
	if ph, ok := p.of[value]; ok {
		return ph
	}
	p.n[kind]++
	ph := "<" + kind + "-" + strconv.Itoa(p.n[kind]) + ">"
	p.of[value], p.value[ph] = ph, value
	return ph
}

var placeholderRE = regexp.MustCompile(`<[a-z]+-[0-9]+>`)

// fill puts the values back in a request section.
func (p *placeholders) fill(s string) string {
	return placeholderRE.ReplaceAllStringFunc(s, func(ph string) string {
		if v, ok := p.value[ph]; ok {
			return v
		}
		return ph
	})
}

// idFields are the JSON string fields whose values are ids made per run,
// by the kind of their placeholder.
var idFields = map[string]string{"taskId": "task", "requestState": "state", "elicitationId": "elicitation"}

var (
	idFieldRE   = regexp.MustCompile(`"(taskId|requestState|elicitationId)":"([^"]*)"`)
	timeFieldRE = regexp.MustCompile(`"(createdAt|lastUpdatedAt)":"[^"]*"`)
	// taskIDRE is a task id anywhere else: a job's, in the text a model
	// reads.
	taskIDRE = regexp.MustCompile(`task_[a-z2-7]{26}`)
	// askIDRE is the id of a request the endpoint sends the client (an
	// elicitation/create on a call's stream): the client's answer names
	// it, whatever numbering the endpoint uses.
	askIDRE = regexp.MustCompile(`("jsonrpc":"2\.0","id":)([0-9]+|"[^"]*")(,"method":)`)
)

// response writes a response as a transcript holds it: its status, the
// headers that matter, and its body.
func (p *placeholders) response(resp *http.Response, raw []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintln(&b, resp.Status)
	for _, h := range transcriptHeaders {
		v := resp.Header.Get(h)
		if v == "" {
			continue
		}
		if h == "Mcp-Session-Id" {
			v = p.name("session", v)
		}
		fmt.Fprintf(&b, "%s: %s\n", h, v)
	}
	if len(raw) > 0 {
		b.WriteString("\n")
		b.Write(p.body(raw))
	}
	return b.Bytes()
}

// body writes a response body, or the rest of one, with its ids and times
// normalized.
func (p *placeholders) body(raw []byte) []byte {
	body := idFieldRE.ReplaceAllStringFunc(string(raw), func(m string) string {
		sub := idFieldRE.FindStringSubmatch(m)
		return `"` + sub[1] + `":"` + p.name(idFields[sub[1]], sub[2]) + `"`
	})
	body = taskIDRE.ReplaceAllStringFunc(body, func(id string) string { return p.name("task", id) })
	body = askIDRE.ReplaceAllStringFunc(body, func(m string) string {
		sub := askIDRE.FindStringSubmatch(m)
		return sub[1] + p.name("request", sub[2]) + sub[3]
	})
	body = timeFieldRE.ReplaceAllString(body, `"$1":"<time>"`)
	var b bytes.Buffer
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		b.WriteString(strings.TrimRight(sc.Text(), "\r") + "\n")
	}
	return b.Bytes()
}
