package schema

// The state of one Validate call: pooled, it holds the parse arena, the
// instance path and the messages reported so far.

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// vstate is the state of one Validate call; pooled.
type vstate struct {
	arena arena
	errs  []string
	path  []pathSeg
	quiet int // > 0 inside not/if: only validity matters, no messages
	depth int

	regexpSpent time.Duration // in backtracking pattern matches
	steps       int           // nodes applied to values so far
	maxSteps    int           // the call's budget of steps
	refused     string        // set by a pattern that ran out of time, or the step budget: the call fails
}

type pathSeg struct {
	key string
	idx int // -1 for a key
}

var statePool = sync.Pool{New: func() any { return new(vstate) }}

func (vs *vstate) release() {
	if cap(vs.arena.members) > maxPooled || cap(vs.arena.elems) > maxPooled {
		vs.arena = arena{} // do not keep a huge call's memory in the pool
	}
	vs.arena.reset()
	clear(vs.errs)
	clear(vs.path)
	vs.errs, vs.path, vs.quiet, vs.depth, vs.regexpSpent = vs.errs[:0], vs.path[:0], 0, 0, 0
	vs.refused, vs.steps, vs.maxSteps = "", 0, 0
	statePool.Put(vs)
}

// maxPooled is the most members or elements a pooled state keeps room for.
const maxPooled = 4096

// A call's step budget: baseSteps plus stepsPerByte for each byte of its
// arguments. Validating applies one node to one value per step; a normal
// schema takes a few steps per value, but one that branches into itself
// ({"anyOf":[{"$ref":"#"},{"$ref":"#"}]}) or nests anyOf over reused
// definitions takes exponentially many, and would otherwise spin for ever.
// A step costs 50 to 100 ns, so the base is 10 to 20 ms: far more than
// any real schema needs for a small argument.
const (
	baseSteps    = 200_000
	stepsPerByte = 16
)

// maxValidateDepth stops a schema that refers to itself without consuming
// the instance ({"$ref": "#"}), which would otherwise recurse forever.
const maxValidateDepth = 8192

// report records msg for the current instance location, as ajv's
// errorsText prints it: "data" + instancePath + " " + message.
func (vs *vstate) report(msg string) {
	if vs.quiet > 0 || len(vs.errs) >= maxMessages {
		return
	}
	vs.errs = append(vs.errs, vs.where()+" "+msg)
}

// maxMessages is the most messages one call keeps. ajv keeps every one, but
// failed anyOf branches over deep arguments can report millions (each with
// its path) before the step budget ends the call.
const maxMessages = 1000

// where is the current instance location as ajv's errorsText prints it:
// "data" + instancePath.
func (vs *vstate) where() string {
	var b strings.Builder
	b.WriteString("data")
	for _, s := range vs.path {
		b.WriteByte('/')
		if s.idx >= 0 {
			b.WriteString(strconv.Itoa(s.idx))
		} else {
			b.WriteString(escapePointer(s.key))
		}
	}
	return b.String()
}

// mark returns the error count, for resetting after a passing anyOf/oneOf.
func (vs *vstate) mark() int { return len(vs.errs) }

func (vs *vstate) resetTo(m int) {
	if vs.quiet == 0 {
		vs.errs = vs.errs[:m]
	}
}

// at validates v (a member or element of the current instance) against n
// with key or index pushed onto the instance path.
func (vs *vstate) at(n *schemaNode, v *jsonValue, key string, idx int, ev *evaluated) bool {
	vs.path = append(vs.path, pathSeg{key: key, idx: idx})
	ok := vs.validate(n, v, ev)
	vs.path = vs.path[:len(vs.path)-1]
	return ok
}
