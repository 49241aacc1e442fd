package schema

// Compiling the object keywords: maxProperties, minProperties, required,
// propertyNames, additionalProperties, dependencies, properties,
// patternProperties, dependentRequired, dependentSchemas and
// unevaluatedProperties.

import (
	"strconv"
	"strings"
)

func (k *keywordCompiler) objectKeywords() error {
	n := k.n
	var err error
	if n.maxProps, err = k.count("maxProperties"); err != nil {
		return err
	}
	if n.minProps, err = k.count("minProperties"); err != nil {
		return err
	}
	n.maxPropsMsg = "must NOT have more than " + strconv.Itoa(n.maxProps) + " properties"
	n.minPropsMsg = "must NOT have fewer than " + strconv.Itoa(n.minProps) + " properties"
	if n.required, _, err = k.strings("required"); err != nil {
		return err
	}
	if n.propertyNames, err = k.sub("propertyNames"); err != nil {
		return err
	}
	if n.addlProps, err = k.sub("additionalProperties"); err != nil {
		return err
	}
	if n.addlProps != nil {
		n.addlPropsPresent = true
		n.addlPropsFalse = n.addlProps.isBool && !n.addlProps.boolValue
	}
	if err := k.dependencies(); err != nil {
		return err
	}
	if n.properties, err = k.subMap("properties"); err != nil {
		return err
	}
	if len(n.properties) > 0 {
		n.propertySet = make(map[string]struct{}, len(n.properties))
	}
	for _, p := range n.properties {
		n.propertySet[p.name] = struct{}{}
	}
	if err := k.patternProperties(); err != nil {
		return err
	}
	if n.depRequired, err = k.propDeps("dependentRequired", true); err != nil {
		return err
	}
	if n.depSchemas, err = k.subMap("dependentSchemas"); err != nil {
		return err
	}
	if n.unevalProps, err = k.sub("unevaluatedProperties"); err != nil {
		return err
	}
	if n.unevalProps != nil {
		n.unevalPropsPresent = true
		n.unevalPropsFalse = n.unevalProps.isBool && !n.unevalProps.boolValue
		n.needsEval = true
	}
	n.hasObject = k.hasGroup(typeObject)
	return nil
}

// dependencies splits draft-07 "dependencies" into property and schema
// dependencies, as ajv does.
func (k *keywordCompiler) dependencies() error {
	d := k.v.get("dependencies")
	if d == nil {
		return nil
	}
	if d.kind != jsonObject {
		return k.errorf("dependencies must be an object")
	}
	var err error
	if k.n.propDeps, err = k.propDeps("dependencies", false); err != nil {
		return err
	}
	for i := range d.members {
		m := &d.members[i]
		if m.val.kind == jsonArray || m.key == "__proto__" {
			continue
		}
		if m.val.kind != jsonObject && m.val.kind != jsonBool {
			return k.errorf("dependencies/%s must be a schema or an array of strings", escapePointer(m.key))
		}
		n, err := k.c.node(&m.val, k.ptr+"/dependencies/"+escapePointer(m.key))
		if err != nil {
			return err
		}
		k.n.schemaDeps = append(k.n.schemaDeps, namedNode{name: m.key, node: n})
	}
	return nil
}

// propDeps reads the property-array entries of dependencies or
// dependentRequired, with ajv's message for each.
func (k *keywordCompiler) propDeps(kw string, all bool) ([]propDeps, error) {
	d := k.v.get(kw)
	if d == nil {
		return nil, nil
	}
	if d.kind != jsonObject {
		return nil, k.errorf("%s must be an object", kw)
	}
	var out []propDeps
	for i := range d.members {
		m := &d.members[i]
		if m.val.kind != jsonArray {
			if all {
				return nil, k.errorf("%s/%s must be an array of strings", kw, escapePointer(m.key))
			}
			continue
		}
		deps := make([]string, len(m.val.elems))
		for j, e := range m.val.elems {
			if e.kind != jsonString {
				return nil, k.errorf("%s/%s must be an array of strings", kw, escapePointer(m.key))
			}
			deps[j] = e.str
		}
		if len(deps) == 0 || m.key == "__proto__" {
			continue
		}
		word := "property"
		if len(deps) > 1 {
			word = "properties"
		}
		msg := "must have " + word + " " + strings.Join(deps, ", ") + " when property " + m.key + " is present"
		out = append(out, propDeps{prop: m.key, deps: deps, msg: msg})
	}
	return out, nil
}

func (k *keywordCompiler) patternProperties() error {
	named, err := k.subMap("patternProperties")
	if err != nil {
		return err
	}
	for _, nn := range named {
		re, err := compilePattern(nn.name)
		if err != nil {
			return k.errorf("patternProperties %q: %v", nn.name, err)
		}
		k.n.patternProps = append(k.n.patternProps, patternNode{re: re, node: nn.node})
	}
	return nil
}
