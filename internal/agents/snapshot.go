package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// warning is a difference between replicas that was not logged yet.
type warning struct {
	agentKey, tool, differs string
}

// rebuildLocked recomputes a project's snapshot and returns the differences
// between replicas to log. Agents are visited in the order they first
// registered, so the first keeps a contested name and later ones get _2,
// _3…; a name once assigned stays while a replica or ghost of its agent
// offers the tool.
func (r *Registry) rebuildLocked(p *project) []warning {
	prev := p.snap.Load()
	if prev == nil {
		prev = emptySnapshot
	}
	s := &Snapshot{
		Tools:     make(map[string]*Tool, len(prev.Tools)+8),
		ToolList:  make([]*Tool, 0, len(prev.ToolList)+8),
		Resources: make(map[string]*Resource, len(prev.Resources)),
		Prompts:   make(map[string]*Prompt, len(prev.Prompts)),
		Changed:   make(chan struct{}),
	}
	ns := namer{taken: make(map[string]string, len(prev.Tools)+8), next: make(map[string]int)}
	// Names already assigned keep their owners. Only the agents that
	// changed since the last rebuild merge their replicas again; the others
	// bring the pieces they made then.
	var changed []*agent
	for _, a := range p.order {
		if a.pieces == nil {
			a.pieces = &pieces{tools: a.mergeTools(), resources: a.mergeResources(), prompts: a.mergePrompts()}
			a.forgetUnoffered()
			p.count(a, a.pieces.tools)
			changed = append(changed, a)
		}
		for _, exp := range a.names {
			ns.taken[exp] = a.keyID
		}
	}
	p.settleContested(&ns, changed)
	var warnings []warning
	for _, a := range p.order {
		for _, t := range a.pieces.tools {
			if t.Name == "" { // merged in this rebuild
				exp, ok := a.names[t.Def.Name]
				if !ok {
					exp = ns.unique(t.base)
					a.names[t.Def.Name] = exp
					ns.taken[exp] = a.keyID
				}
				t.Name = exp
				if w, ok := a.noteDifference(t); ok {
					warnings = append(warnings, w)
				}
			}
			s.Tools[t.Name] = t
			s.ToolList = append(s.ToolList, t)
		}
		for _, res := range a.pieces.resources {
			if _, dup := s.Resources[res.Def.URI]; dup {
				continue // the first agent keeps a URI
			}
			s.Resources[res.Def.URI] = res
			s.ResourceList = append(s.ResourceList, res)
		}
		for _, pr := range a.pieces.prompts {
			if _, dup := s.Prompts[pr.Name]; dup {
				continue
			}
			s.Prompts[pr.Name] = pr
			s.PromptList = append(s.PromptList, pr)
		}
	}
	slices.SortFunc(s.ToolList, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.ResourceList, func(a, b *Resource) int { return strings.Compare(a.Def.URI, b.Def.URI) })
	slices.SortFunc(s.PromptList, func(a, b *Prompt) int { return strings.Compare(a.Name, b.Name) })
	if old := p.snap.Swap(s); old != nil {
		close(old.Changed)
	}
	return warnings
}

// settleContested keeps the names of each contested family (one base
// name offered by several agents) in the order of registration (p.order):
// the agent registered first has the base name, the next _2, and so on
// (names other families hold are skipped). A family is checked when one
// of its agents (changed) changed since the last rebuild or left the project; if its
// names are out of that order, they are given again. On one gateway agents
// arrive in order and take the next name, so this changes nothing until
// the holder of a name leaves for good; across gateways an agent
// registered earlier on another one may be heard of later, and this makes
// every gateway end with the same names.
func (p *project) settleContested(ns *namer, changed []*agent) {
	type claim struct {
		a *agent
		t *Tool
	}
	// A family of one is its changed agent alone: nothing to look for.
	// Families of several, and those an agent left, are gathered from
	// every agent.
	families := make(map[string][]claim)
	scan := p.gone
	p.gone = nil
	for b := range scan {
		if p.claimants[b] == 0 {
			delete(scan, b) // nobody offers it any more
		}
	}
	for _, a := range changed {
		for _, t := range a.pieces.tools {
			if p.claimants[t.base] > 1 || scan[t.base] {
				if scan == nil {
					scan = make(map[string]bool)
				}
				scan[t.base] = true
				continue
			}
			families[t.base] = append(families[t.base], claim{a, t})
		}
	}
	if len(scan) > 0 {
		for _, a := range p.order {
			for _, t := range a.pieces.tools {
				if scan[t.base] {
					families[t.base] = append(families[t.base], claim{a, t})
				}
			}
		}
	}
	var remake []*agent
	for base, cs := range families {
		if familyInOrder(base, ns, func(i int) (*agent, *Tool) { return cs[i].a, cs[i].t }, len(cs)) {
			continue
		}
		for _, c := range cs {
			exp, ok := c.a.names[c.t.Def.Name]
			if !ok {
				continue
			}
			delete(c.a.names, c.t.Def.Name)
			if ns.taken[exp] == c.a.keyID {
				delete(ns.taken, exp)
			}
			if c.t.Name != "" && !slices.Contains(remake, c.a) {
				remake = append(remake, c.a) // its pieces carry the old name
			}
		}
		delete(ns.next, base)
	}
	for _, a := range remake {
		a.pieces = &pieces{tools: a.mergeTools(), resources: a.mergeResources(), prompts: a.mergePrompts()}
	}
}

// familyInOrder reports whether the n claimants of base (claim(i), in
// the order of registration) hold base, base_2, … in that order, skipping
// only names that agents outside the family hold, with the claimants not
// named yet after all the named ones (they take the next names).
func familyInOrder(base string, ns *namer, claim func(int) (*agent, *Tool), n int) bool {
	member := func(key string) bool {
		for i := range n {
			if a, _ := claim(i); a.keyID == key {
				return true
			}
		}
		return false
	}
	prev, unnamed := 0, false
	for i := range n {
		a, t := claim(i)
		exp, named := a.names[t.Def.Name]
		if !named {
			unnamed = true
			continue
		}
		k := suffix(exp, base)
		if unnamed || k <= prev {
			return false
		}
		for j := prev + 1; j < k; j++ { // a gap: only other families' names may fill it
			name := base
			if j > 1 {
				name = base + "_" + strconv.Itoa(j)
			}
			holder, ok := ns.taken[name]
			if !ok || member(holder) {
				return false
			}
		}
		prev = k
	}
	return true
}

// suffix returns k of an exposed name base_k, 1 for base itself, and 0
// for a name of another shape.
func suffix(name, base string) int {
	if name == base {
		return 1
	}
	if len(name) < len(base)+2 || name[:len(base)] != base || name[len(base)] != '_' {
		return 0
	}
	k, err := strconv.Atoi(name[len(base)+1:])
	if err != nil || k < 2 {
		return 0
	}
	return k
}

// pieces are what one agent contributes to its project's snapshot, made
// when the agent last changed. A snapshot shares them with the ones before
// it, so they are never modified once made.
type pieces struct {
	tools     []*Tool
	resources []*Resource
	prompts   []*Prompt
}

// forgetUnoffered drops the names and logged differences of tools a no
// longer offers, after its pieces were made again.
func (a *agent) forgetUnoffered() {
	offered := func(reg string) bool {
		return slices.ContainsFunc(a.pieces.tools, func(t *Tool) bool { return t.Def.Name == reg })
	}
	for reg := range a.names {
		if !offered(reg) {
			delete(a.names, reg)
		}
	}
	for reg := range a.warned {
		if !offered(reg) {
			delete(a.warned, reg)
		}
	}
}

// noteDifference records how t's replicas differ, and returns a warning
// when that is new.
func (a *agent) noteDifference(t *Tool) (warning, bool) {
	if len(t.Differs) == 0 {
		delete(a.warned, t.Def.Name) // a later difference is news again
		return warning{}, false
	}
	d := strings.Join(t.Differs, "; ")
	if a.warned[t.Def.Name] == d {
		return warning{}, false
	}
	a.warned[t.Def.Name] = d
	return warning{agentKey: a.keyID, tool: t.Def.Name, differs: d}, true
}

// replicaIndex is what a rebuild needs of a replica's registration, worked
// out once when it connects: rebuilds run on every change, over every
// replica of the project.
type replicaIndex struct {
	tools     []string // registered tool names, as in Reg.Tools
	resources []string // URIs, as in Reg.Resources
	prompts   []string // exposed prompt names, as in Reg.Prompts
	defs      []uint64 // a hash of each tool's definition, to spot differences
}

var defSeed = maphash.MakeSeed()

func indexOf(reg *agentproto.Registration) replicaIndex {
	var x replicaIndex
	for _, t := range reg.Tools {
		x.tools = append(x.tools, t.Name)
		t.Disabled = false // state, not definition
		b, _ := json.Marshal(t)
		x.defs = append(x.defs, maphash.Bytes(defSeed, b))
	}
	for _, r := range reg.Resources {
		x.resources = append(x.resources, r.URI)
	}
	for _, p := range reg.Prompts {
		x.prompts = append(x.prompts, ExposedName(reg, p.Name))
	}
	return x
}

// sources are the replicas that offer one name: the connected ones, oldest
// first, or, when none is connected, the ghosts that do.
type sources struct {
	reps       []*Replica
	at         []int     // where the name is in each replica's registration
	graceUntil time.Time // set when reps are ghosts
}

// offers groups a's replicas (then its ghosts) by the names list returns,
// keeping the order in which names first appear.
func (a *agent) offers(list func(*replicaIndex) []string) ([]string, map[string]*sources) {
	var names []string
	by := make(map[string]*sources)
	for _, rep := range a.replicas {
		for i, n := range list(&rep.idx) {
			src := by[n]
			if src == nil {
				src = &sources{reps: make([]*Replica, 0, len(a.replicas)), at: make([]int, 0, len(a.replicas))}
				by[n] = src
				names = append(names, n)
			}
			src.reps = append(src.reps, rep)
			src.at = append(src.at, i)
		}
	}
	for _, g := range a.ghosts {
		for i, n := range list(&g.rep.idx) {
			src := by[n]
			if src == nil {
				src = &sources{graceUntil: g.until}
				by[n] = src
				names = append(names, n)
			}
			if src.graceUntil.IsZero() {
				continue // a connected replica offers it
			}
			src.reps = append(src.reps, g.rep)
			src.at = append(src.at, i)
			if g.until.After(src.graceUntil) {
				src.graceUntil = g.until
			}
		}
	}
	return names, by
}

// mergeTools is the union of the tools a's replicas offer, each with the
// newest offering replica's definition. Names are left to the caller.
func (a *agent) mergeTools() []*Tool {
	names, by := a.offers(func(x *replicaIndex) []string { return x.tools })
	tools := make([]*Tool, 0, len(names))
	for _, n := range names {
		src := by[n]
		last := len(src.reps) - 1
		newest := src.reps[last]
		def := newest.Reg.Tools[src.at[last]]
		t := &Tool{
			base:     ExposedName(newest.Reg, def.Name),
			AgentKey: a.keyID, Def: def, Reg: newest.Reg, Schema: newest.Schemas[n],
			GraceUntil: src.graceUntil, OwnsInstance: hasProperty(def.InputSchema, "instance"),
		}
		for _, rep := range src.reps {
			if rep.off[n] {
				continue
			}
			t.Enabled = true
			if src.graceUntil.IsZero() && !rep.Disabled() {
				t.Replicas = append(t.Replicas, rep)
			}
		}
		if src.graceUntil.IsZero() {
			seen := newest.idx.defs[src.at[last]]
			var compared []uint64
			for i, rep := range src.reps[:last] {
				d := rep.idx.defs[src.at[i]]
				if d == seen || slices.Contains(compared, d) {
					continue // the same definition: most replicas run the same code
				}
				compared = append(compared, d)
				for _, diff := range toolDifferences(def, rep.Reg.Tools[src.at[i]]) {
					if !slices.Contains(t.Differs, diff) {
						t.Differs = append(t.Differs, diff)
					}
				}
			}
		}
		tools = append(tools, t)
	}
	return tools
}

// mergeResources is the union of the resources a's replicas offer.
func (a *agent) mergeResources() []*Resource {
	names, by := a.offers(func(x *replicaIndex) []string { return x.resources })
	out := make([]*Resource, 0, len(names))
	for _, uri := range names {
		src := by[uri]
		last := len(src.reps) - 1
		res := &Resource{Def: src.reps[last].Reg.Resources[src.at[last]], AgentKey: a.keyID, GraceUntil: src.graceUntil}
		on := switchedOn(src.reps, OffKey(agentproto.KindResource, uri))
		if src.graceUntil.IsZero() {
			if len(on) == 0 {
				continue // every replica switched it off
			}
			res.Replicas = liveReplicas(on)
		}
		out = append(out, res)
	}
	return out
}

// mergePrompts is the union of the prompts a's replicas offer, by exposed
// name.
func (a *agent) mergePrompts() []*Prompt {
	names, by := a.offers(func(x *replicaIndex) []string { return x.prompts })
	out := make([]*Prompt, 0, len(names))
	for _, name := range names {
		src := by[name]
		last := len(src.reps) - 1
		def := src.reps[last].Reg.Prompts[src.at[last]]
		pr := &Prompt{Name: name, Def: def, AgentKey: a.keyID, GraceUntil: src.graceUntil}
		on := switchedOn(src.reps, OffKey(agentproto.KindPrompt, def.Name))
		if src.graceUntil.IsZero() {
			if len(on) == 0 {
				continue // every replica switched it off
			}
			pr.Replicas = liveReplicas(on)
		}
		out = append(out, pr)
	}
	return out
}

// switchedOn returns the replicas that have not switched off the item
// named key (see OffKey).
func switchedOn(reps []*Replica, key string) []*Replica {
	on := make([]*Replica, 0, len(reps))
	for _, rep := range reps {
		if !rep.off[key] {
			on = append(on, rep)
		}
	}
	return on
}

// toolDifferences says how other differs from listed, one entry per field,
// e.g. "annotations.readOnlyHint: true vs false" (listed's value first).
// Whether a tool is switched on is state, not definition, and not compared.
func toolDifferences(listed, other agentproto.Tool) []string {
	var out []string
	str := func(field, a, b string) {
		if a != b {
			out = append(out, fmt.Sprintf("%s: %s vs %s", field, quoteShort(a), quoteShort(b)))
		}
	}
	flag := func(field string, a, b *bool) {
		if fmtBool(a) != fmtBool(b) {
			out = append(out, fmt.Sprintf("%s: %s vs %s", field, fmtBool(a), fmtBool(b)))
		}
	}
	doc := func(field string, a, b json.RawMessage) {
		if !sameJSON(a, b) {
			out = append(out, field+" differs")
		}
	}
	str("title", listed.Title, other.Title)
	str("description", listed.Description, other.Description)
	doc("inputSchema", listed.InputSchema, other.InputSchema)
	doc("outputSchema", listed.OutputSchema, other.OutputSchema)
	la, oa := listed.Annotations, other.Annotations
	if la == nil {
		la = &agentproto.Annotations{}
	}
	if oa == nil {
		oa = &agentproto.Annotations{}
	}
	str("annotations.title", la.Title, oa.Title)
	flag("annotations.readOnlyHint", la.ReadOnlyHint, oa.ReadOnlyHint)
	flag("annotations.destructiveHint", la.DestructiveHint, oa.DestructiveHint)
	flag("annotations.idempotentHint", la.IdempotentHint, oa.IdempotentHint)
	flag("annotations.openWorldHint", la.OpenWorldHint, oa.OpenWorldHint)
	if listed.TimeoutMs != other.TimeoutMs {
		out = append(out, fmt.Sprintf("timeoutMs: %d vs %d", listed.TimeoutMs, other.TimeoutMs))
	}
	return out
}

// DifferingFields returns the last part of each field a [Tool.Differs]
// entry names ("readOnlyHint", "description"), for a short marker.
func DifferingFields(differs []string) []string {
	var out []string
	for _, d := range differs {
		f, _, _ := strings.Cut(d, ":")
		f = strings.TrimSuffix(f, " differs")
		if i := strings.LastIndexByte(f, '.'); i >= 0 {
			f = f[i+1:]
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

func fmtBool(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}

// quoteShort quotes s for a log line, cut to 40 characters.
func quoteShort(s string) string {
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// sameJSON reports whether two JSON documents are equal, ignoring spacing
// and member order.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// hasProperty reports whether an object schema declares property name.
func hasProperty(schema json.RawMessage, name string) bool {
	if !bytes.Contains(schema, []byte(`"`+name+`"`)) {
		return false
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	json.Unmarshal(schema, &s)
	_, ok := s.Properties[name]
	return ok
}

// liveReplicas returns the replicas the dashboard has not disabled.
func liveReplicas(reps []*Replica) []*Replica {
	out := make([]*Replica, 0, len(reps))
	for _, r := range reps {
		if !r.Disabled() {
			out = append(out, r)
		}
	}
	return out
}

// namer hands out exposed names during one rebuild.
type namer struct {
	taken map[string]string // exposed name → agent key
	// next is, by base name, the first suffix not yet tried: names only
	// get taken during a rebuild, so the ones tried before stay taken, and
	// N agents offering one tool name cost O(N), not O(N²).
	next map[string]int
}

// unique returns base, or base_2, base_3… whichever is not taken.
func (ns *namer) unique(base string) string {
	if _, ok := ns.taken[base]; !ok {
		return base
	}
	i := max(ns.next[base], 2)
	for ; ; i++ {
		n := base + "_" + strconv.Itoa(i)
		if _, ok := ns.taken[n]; !ok {
			ns.next[base] = i + 1
			return n
		}
	}
}
