package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// inlineCode is `code` on one line.
var inlineCode = regexp.MustCompile("`[^`]*`")

// mdLink is a Markdown link or image: [text](target) or [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestMarkdownLinks checks every relative link in the repository's
// Markdown files: the file or folder it names exists, and a #fragment
// names a heading of the Markdown file it points into. A doc moved or a
// heading renamed fails here instead of leaving readers at a dead end.
func TestMarkdownLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	headings := map[string]map[string]bool{} // file → anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := headings[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		headings[path] = anchors(string(b))
		return headings[path]
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", ".git", "testdata", "dist":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(b)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[frag] {
				t.Errorf("%s links to %s, but that file has no heading #%s", rel, target, frag)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stripCode removes fenced code blocks and inline code, where ](…) is
// code, not a link.
func stripCode(s string) string {
	var out []string
	fenced := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, inlineCode.ReplaceAllString(line, ""))
		}
	}
	return strings.Join(out, "\n")
}

// anchors returns the fragment names GitHub gives a Markdown file's
// headings: lower case, punctuation dropped, spaces as hyphens, and -1, -2
// for repeats.
func anchors(s string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	fenced := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
