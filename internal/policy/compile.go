package policy

import (
	"fmt"
	"log/slog"
	"math/bits"
	"regexp"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
)

// CostLimit bounds one evaluation of one rule, in cel-go's cost units
// (about one per operation, one per byte scanned by a string function).
// A rule that runs past it fails closed.
const CostLimit = 100_000

// Options are what a compiled policy needs from the gateway.
type Options struct {
	Log *slog.Logger     // evaluation errors, once per rule and minute; nil: discarded
	Now func() time.Time // CEL's now; nil: time.Now
}

// Policy is a compiled [Document], safe for concurrent use; it is built
// once per policy version.
type Policy struct {
	doc   Document
	rules map[string][]*compiled // by where they apply
	opts  Options

	listMu sync.RWMutex
	byTool map[string][]*compiled // point + "\x00" + tool name → the rules whose tools match

	mu       sync.Mutex
	lastLogs map[string]time.Time // rule name → when its evaluation error was last logged
}

// maxToolLists bounds the per-tool rule lists kept; past it, lists are
// built per evaluation.
const maxToolLists = 4096

// rulesFor returns the rules at point on whose tool patterns take tool,
// in order.
func (p *Policy) rulesFor(on, tool string) []*compiled {
	p.listMu.RLock()
	list, ok := p.byTool[on+"\x00"+tool] // the key is not built: the compiler looks up the bytes
	p.listMu.RUnlock()
	if ok {
		return list
	}
	for _, r := range p.rules[on] {
		if r.matches(tool) {
			list = append(list, r)
		}
	}
	p.listMu.Lock()
	if len(p.byTool) < maxToolLists {
		p.byTool[on+"\x00"+tool] = list
	}
	p.listMu.Unlock()
	return list
}

// compiled is one rule ready to evaluate.
type compiled struct {
	Rule
	prg      cel.Program // nil: no condition, always true
	patterns []*regexp.Regexp
	audit    bool
	tracked  bool    // stopped at CostLimit as it runs
	readsNow bool    // the condition reads now: its truth changes with time alone
	guards   []guard // conjuncts read without cel-go (guard.go)

	// fast, for a tracked condition, is the same condition untracked; it
	// runs when the call's inputs are at most fastUpTo bytes, where the
	// worst case stays under CostLimit (tracking costs about a third of
	// an evaluation, and most calls are small).
	fast     cel.Program
	fastUpTo int
}

// env is the one CEL environment every rule compiles in. Values are maps
// (the caller, the tool, the result) and the arguments as JSON decodes
// them, so a misspelt field is an evaluation error, which fails closed.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("caller", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("result", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("now", cel.TimestampType),
		cel.CrossTypeNumericComparisons(true),
	)
})

// Compile checks every rule of d and compiles its condition. The first
// rule that is wrong refuses the whole document with a [*RuleError]
// naming it, where, and the compiler's message: nothing of a wrong
// document is ever applied.
func Compile(d Document, opts Options) (*Policy, error) {
	if len(d.Rules) > MaxRules {
		return nil, fmt.Errorf("the policy has %d rules; at most %d are kept", len(d.Rules), MaxRules)
	}
	if err := checkInterceptors(d.Interceptors); err != nil {
		return nil, err
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Policy{doc: d, rules: map[string][]*compiled{}, opts: opts, lastLogs: map[string]time.Time{}, byTool: map[string][]*compiled{}}
	seen := map[string]bool{}
	for i, r := range d.Rules {
		patterns, err := r.check(i, seen)
		if err != nil {
			return nil, err
		}
		c := &compiled{Rule: r, patterns: patterns, audit: r.Mode == Audit}
		if r.When != "" {
			if err := compileWhen(e, i, c); err != nil {
				return nil, err
			}
		}
		p.rules[r.On] = append(p.rules[r.On], c)
	}
	return p, nil
}

// compileWhen compiles c's condition, which must yield a bool.
func compileWhen(e *cel.Env, i int, c *compiled) error {
	ast, iss := e.Compile(c.When)
	if iss != nil && iss.Err() != nil {
		first := iss.Errors()[0]
		return &RuleError{Index: i, Name: c.Name, Field: "when",
			Line: first.Location.Line(), Column: first.Location.Column() + 1, Msg: first.Message}
	}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		c.readsNow = c.readsNow || ref.Name == "now"
	}
	c.guards = guardsOf(ast.NativeRep().Expr())
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return &RuleError{Index: i, Name: c.Name, Field: "when", Line: 1, Column: 1,
			Msg: fmt.Sprintf("the condition yields %s; it must yield a bool (true: the rule decides)", t)}
	}
	program := func(opts ...cel.ProgramOption) (cel.Program, error) {
		prg, err := e.Program(ast, opts...)
		if err != nil {
			return nil, &RuleError{Index: i, Name: c.Name, Field: "when", Msg: err.Error()}
		}
		return prg, nil
	}
	// A condition whose worst case, over the largest inputs a call can
	// have, stays under the limit needs no tracking as it runs (tracking
	// costs about a third of an evaluation); any other is stopped at the
	// limit, unless the call's own inputs are small enough (fastUpTo).
	under := func(input uint64) bool {
		est, err := e.EstimateCost(ast, sizes{input: input})
		return err == nil && est.Max <= CostLimit
	}
	var err error
	if under(maxInputSize) {
		c.prg, err = program()
		return err
	}
	c.tracked = true
	if c.prg, err = program(cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100)); err != nil {
		return err
	}
	if upTo := largestUnder(under); upTo > 0 {
		c.fastUpTo = upTo
		c.fast, err = program()
	}
	return err
}

// largestUnder returns the largest power of two n ≤ maxInputSize for which
// under(n) holds (a worst case rises with the inputs' size), or 0.
func largestUnder(under func(uint64) bool) int {
	lo, hi := -1, bits.Len(maxInputSize)-1 // exponents: under(1<<lo) holds, under(1<<hi) does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if under(1 << mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo < 0 {
		return 0
	}
	return 1 << lo
}

// Largest sizes of what a condition reads, for the static cost estimate:
// what the gateway says of a caller and a tool is short; arguments and
// results are bounded only by the gateway's size limits.
const (
	maxCallerSize = 1 << 10
	maxToolSize   = 64 << 10
	maxInputSize  = 16 << 20
)

// sizes estimates the size of each variable's values for
// [cel.Env.EstimateCost]: arguments and results are at most input bytes.
type sizes struct{ input uint64 }

func (s sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	switch path[0] {
	case "caller":
		return &checker.SizeEstimate{Max: maxCallerSize}
	case "tool":
		return &checker.SizeEstimate{Max: maxToolSize}
	default:
		return &checker.SizeEstimate{Max: s.input}
	}
}

func (sizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// fastUpTo says up to which input size rule name's tracked condition runs
// untracked.
func (p *Policy) fastUpTo(name string) int {
	for _, rs := range p.rules {
		for _, r := range rs {
			if r.Name == name {
				return r.fastUpTo
			}
		}
	}
	return 0
}

// Tracked reports whether rule name's condition is stopped at
// [CostLimit] as it runs (its worst case is over the limit or unknown).
func (p *Policy) tracked(name string) bool {
	for _, rs := range p.rules {
		for _, r := range rs {
			if r.Name == name {
				return r.tracked
			}
		}
	}
	return false
}

// Document returns the document p was compiled from.
func (p *Policy) Document() Document { return p.doc }

// ReadsNow reports whether a rule at point on reads the time (`now`), so
// that what it decides can change with nothing else changing: a list
// under such a rule is judged anew at every tools/list.
func (p *Policy) ReadsNow(on string) bool {
	if p == nil {
		return false
	}
	for _, r := range p.rules[on] {
		if r.readsNow {
			return true
		}
	}
	return false
}

// Has reports whether p has a rule at point on, so that a caller can skip
// building the input of an evaluation nobody reads.
func (p *Policy) Has(on string) bool { return p != nil && len(p.rules[on]) > 0 }

// logEvalError logs a rule's evaluation error, at most once per rule and
// minute: a rule that fails on every call must not flood the log.
func (p *Policy) logEvalError(rule, tool string, err error) {
	now := time.Now()
	p.mu.Lock()
	last, seen := p.lastLogs[rule]
	if seen && now.Sub(last) < time.Minute {
		p.mu.Unlock()
		return
	}
	p.lastLogs[rule] = now
	p.mu.Unlock()
	p.opts.Log.Warn("a policy rule could not be evaluated; the call was refused", "rule", rule, "tool", tool, "err", err)
}
