package schema

// Base URIs and $ref resolution: which schemas a document holds ($id,
// $anchor, $dynamicAnchor), and where a reference (URI and JSON Pointer
// fragment) leads.

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Keywords whose value is one schema, an array of schemas, or a map of them.
var (
	schemaKeywords = []string{
		"not", "if", "then", "else", "items", "additionalItems", "contains",
		"propertyNames", "additionalProperties", "unevaluatedItems", "unevaluatedProperties",
	}
	schemaArrayKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	schemaMapKeywords   = []string{
		"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies",
	}
)

func (c *compiler) register(v *jsonValue, base, ptr string) error {
	if v.kind != jsonObject {
		return nil
	}
	if _, done := c.bases[v]; done {
		return nil
	}
	if id := v.get("$id"); id != nil && id.kind == jsonString {
		abs, err := resolveURI(base, id.str)
		if err != nil {
			return fmt.Errorf("%s: $id %q: %v", ptr, id.str, err)
		}
		noFrag, frag, _ := strings.Cut(abs, "#")
		if frag != "" && !c.draft2020 && strings.HasPrefix(id.str, "#") {
			c.resources[abs] = v // draft-07 location-independent id: "#foo"
		} else {
			base = noFrag
			c.resources[noFrag] = v
		}
	}
	for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
		if a := v.get(kw); a != nil && a.kind == jsonString {
			c.resources[base+"#"+a.str] = v
		}
	}
	c.bases[v] = base
	c.ptrs[v] = ptr
	for i := range v.members {
		m := &v.members[i]
		sub := ptr + "/" + escapePointer(m.key)
		switch {
		case m.val.kind == jsonArray && slices.Contains(schemaArrayKeywords, m.key):
			for j := range m.val.elems {
				if err := c.register(&m.val.elems[j], base, sub+"/"+strconv.Itoa(j)); err != nil {
					return err
				}
			}
		case slices.Contains(schemaKeywords, m.key):
			if err := c.register(&m.val, base, sub); err != nil {
				return err
			}
		case m.val.kind == jsonObject && slices.Contains(schemaMapKeywords, m.key):
			for j := range m.val.members {
				mm := &m.val.members[j]
				if err := c.register(&mm.val, base, sub+"/"+escapePointer(mm.key)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func resolveURI(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	return b.ResolveReference(r).String(), nil
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// resolveRef finds the schema that ref (as written at from) points to.
func (c *compiler) resolveRef(from *jsonValue, ref string) (*jsonValue, string, error) {
	base := c.bases[from]
	abs, err := resolveURI(base, ref)
	if err != nil {
		return nil, "", err
	}
	if v, ok := c.resources[abs]; ok {
		return v, c.ptrs[v], nil
	}
	noFrag, frag, _ := strings.Cut(abs, "#")
	res, ok := c.resources[noFrag]
	if !ok {
		return nil, "", fmt.Errorf("can't resolve reference %q", ref)
	}
	if frag == "" {
		return res, c.ptrs[res], nil
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, "", fmt.Errorf("can't resolve reference %q", ref)
	}
	ptr, _ := url.PathUnescape(frag)
	cur := res
	at := c.ptrs[res]
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var next *jsonValue
		switch cur.kind {
		case jsonObject:
			next = cur.get(tok)
		case jsonArray:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(cur.elems) {
				next = &cur.elems[i]
			}
		}
		if next == nil {
			return nil, "", fmt.Errorf("can't resolve reference %q", ref)
		}
		cur = next
		at += "/" + escapePointer(tok)
	}
	if _, known := c.bases[cur]; !known {
		c.bases[cur] = c.bases[res]
		c.ptrs[cur] = at
	}
	return cur, at, nil
}
