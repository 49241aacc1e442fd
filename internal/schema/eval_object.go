package schema

// Evaluating the object keywords, each extra or unevaluated key reported as
// ajv reports it.

func (vs *vstate) objectGroup(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if !n.hasObject {
		return true
	}
	if v.kind != jsonObject {
		return vs.deferredType(n, typeObject)
	}
	ok := true
	if n.maxProps >= 0 && len(v.members) > n.maxProps {
		vs.report(n.maxPropsMsg)
		ok = false
	}
	if n.minProps >= 0 && len(v.members) < n.minProps {
		vs.report(n.minPropsMsg)
		ok = false
	}
	for _, r := range n.required {
		if v.get(r) == nil {
			vs.report("must have required property '" + r + "'")
			ok = false
		}
	}
	if n.propertyNames != nil && !n.propertyNames.alwaysValid() {
		ok = vs.propertyNames(n, v) && ok
	}
	if n.addlPropsPresent {
		ok = vs.additionalProperties(n, v, ev) && ok
	}
	ok = vs.propDependencies(n.propDeps, v) && ok
	ok = vs.schemaDependencies(n.schemaDeps, v, ev) && ok
	ok = vs.properties(n, v, ev) && ok
	ok = vs.patternProperties(n, v, ev) && ok
	ok = vs.propDependencies(n.depRequired, v) && ok
	ok = vs.schemaDependencies(n.depSchemas, v, ev) && ok
	if n.unevalPropsPresent {
		ok = vs.unevaluatedProperties(n, v, ev) && ok
	}
	return ok
}

// propertyNames validates each key as a string at the object's path, then
// adds ajv's own message after the key's errors.
func (vs *vstate) propertyNames(n *schemaNode, v *jsonValue) bool {
	ok := true
	for i := range v.members {
		name := jsonValue{kind: jsonString, str: v.members[i].key}
		if !vs.validate(n.propertyNames, &name, nil) {
			vs.report("property name must be valid")
			ok = false
		}
	}
	return ok
}

func (vs *vstate) isAdditional(n *schemaNode, key string) bool {
	if _, ok := n.propertySet[key]; ok {
		return false
	}
	for _, pp := range n.patternProps {
		if vs.match(pp.re, key, true) != noMatch {
			return false // undecided: the call fails, with its own message
		}
	}
	return true
}

// additionalProperties reports each extra key at the object's path.
func (vs *vstate) additionalProperties(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if ev != nil {
		ev.allProps = true
	}
	if n.addlProps.alwaysValid() {
		return true
	}
	ok := true
	for i := range v.members {
		m := &v.members[i]
		if !vs.isAdditional(n, m.key) {
			continue
		}
		if n.addlPropsFalse {
			vs.report("must NOT have additional properties")
			ok = false
			continue
		}
		ok = vs.at(n.addlProps, &m.val, m.key, -1, nil) && ok
	}
	return ok
}

// propDependencies reports each missing dependency, each time with ajv's
// message naming all of them.
func (vs *vstate) propDependencies(deps []propDeps, v *jsonValue) bool {
	ok := true
	for _, d := range deps {
		if v.get(d.prop) == nil {
			continue
		}
		for _, dep := range d.deps {
			if v.get(dep) == nil {
				vs.report(d.msg)
				ok = false
			}
		}
	}
	return ok
}

func (vs *vstate) schemaDependencies(deps []namedNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	var buf evaluated
	for _, d := range deps {
		if d.node.alwaysValid() || v.get(d.name) == nil {
			continue
		}
		sub := child(ev, &buf)
		if vs.validate(d.node, v, sub) {
			ev.mergeFrom(sub)
		} else {
			ok = false
		}
	}
	return ok
}

func (vs *vstate) properties(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	for _, p := range n.properties {
		i := memberIndex(v, p.name)
		if i < 0 {
			continue
		}
		ev.markProp(v, i)
		if !p.node.alwaysValid() {
			ok = vs.at(p.node, &v.members[i].val, p.name, -1, nil) && ok
		}
	}
	return ok
}

func memberIndex(v *jsonValue, key string) int {
	for i := range v.members {
		if v.members[i].key == key {
			return i
		}
	}
	return -1
}

func (vs *vstate) patternProperties(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	for _, pp := range n.patternProps {
		for i := range v.members {
			m := &v.members[i]
			switch vs.match(pp.re, m.key, true) {
			case noMatch:
				continue
			case undecided:
				ok = false
				continue
			}
			ev.markProp(v, i)
			if !pp.node.alwaysValid() {
				ok = vs.at(pp.node, &m.val, m.key, -1, nil) && ok
			}
		}
	}
	return ok
}

func (vs *vstate) unevaluatedProperties(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	ok := true
	for i := range v.members {
		if ev.prop(i) {
			continue
		}
		m := &v.members[i]
		if n.unevalPropsFalse {
			vs.report("must NOT have unevaluated properties")
			ok = false
		} else if !n.unevalProps.alwaysValid() {
			ok = vs.at(n.unevalProps, &m.val, m.key, -1, nil) && ok
		}
	}
	ev.allProps = true
	return ok
}
