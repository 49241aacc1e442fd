package schema

// What a schema evaluated in one instance, tracked only where
// unevaluatedProperties or unevaluatedItems needs it.

// evaluated records which members or elements of one instance value a
// schema evaluated, for unevaluatedProperties/Items.
type evaluated struct {
	allProps bool
	props    []bool // by member index
	allItems bool
	items    int
}

func (e *evaluated) markProp(v *jsonValue, i int) {
	if e == nil || e.allProps {
		return
	}
	if e.props == nil {
		e.props = make([]bool, len(v.members))
	}
	e.props[i] = true
}

func (e *evaluated) merge(o *evaluated) {
	if e == nil {
		return
	}
	e.allProps = e.allProps || o.allProps
	if !e.allProps && o.props != nil {
		if e.props == nil {
			e.props = make([]bool, len(o.props))
		}
		for i, p := range o.props {
			e.props[i] = e.props[i] || p
		}
	}
	e.allItems = e.allItems || o.allItems
	e.items = max(e.items, o.items)
}

func (e *evaluated) prop(i int) bool {
	return e.allProps || e.props != nil && e.props[i]
}

// child returns a fresh record for an in-place subschema, or nil when the
// caller is not tracking.
func child(ev *evaluated, buf *evaluated) *evaluated {
	if ev == nil {
		return nil
	}
	*buf = evaluated{}
	return buf
}

func (e *evaluated) mergeFrom(o *evaluated) {
	if e != nil && o != nil {
		e.merge(o)
	}
}
