package schema

// Evaluating the array keywords, keeping the errors ajv keeps and naming the
// duplicate pair ajv names for uniqueItems.

import (
	"strconv"
	"strings"
)

func (vs *vstate) arrayGroup(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if !n.hasArray {
		return true
	}
	if v.kind != jsonArray {
		return vs.deferredType(n, typeArray)
	}
	ok := true
	if n.maxItems >= 0 && len(v.elems) > n.maxItems {
		vs.report(n.maxItemsMsg)
		ok = false
	}
	if n.minItems >= 0 && len(v.elems) < n.minItems {
		vs.report(n.minItemsMsg)
		ok = false
	}
	ok = vs.arrayItems(n, v, ev) && ok
	if n.contains != nil && n.containsOn {
		ok = vs.containsKeyword(n, v, ev) && ok
	}
	if n.uniqueItems {
		ok = vs.unique(n, v) && ok
	}
	if n.unevalItemsPresent {
		ok = vs.unevaluatedItems(n, v, ev) && ok
	}
	return ok
}

func (vs *vstate) arrayItems(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if !n.hasTuple {
		return vs.eachItem(n.items, v, 0, ev)
	}
	ok := true
	if n.extraFirst { // draft-07: additionalItems is a rule before items
		ok = vs.extraItems(n, v, ev)
	}
	for i, s := range n.tuple {
		if i < len(v.elems) && !s.alwaysValid() {
			ok = vs.at(s, &v.elems[i], "", i, nil) && ok
		}
	}
	if ev != nil {
		ev.items = max(ev.items, len(n.tuple))
	}
	if !n.extraFirst {
		ok = vs.extraItems(n, v, ev) && ok
	}
	return ok
}

// extraItems applies additionalItems (draft-07) or items after prefixItems.
func (vs *vstate) extraItems(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if n.extraItems == nil {
		return true
	}
	if n.extraItemsFalse {
		if ev != nil {
			ev.allItems = true
		}
		if len(v.elems) > len(n.tuple) {
			vs.report(n.extraItemsMsg)
			return false
		}
		return true
	}
	return vs.eachItem(n.extraItems, v, len(n.tuple), ev)
}

// eachItem applies s to the elements from index from on.
func (vs *vstate) eachItem(s *schemaNode, v *jsonValue, from int, ev *evaluated) bool {
	if s == nil {
		return true
	}
	if ev != nil {
		ev.allItems = true
	}
	ok := true
	if !s.alwaysValid() {
		for i := from; i < len(v.elems); i++ {
			ok = vs.at(s, &v.elems[i], "", i, nil) && ok
		}
	}
	return ok
}

// containsKeyword follows ajv: with no maximum it stops at the minimum;
// failing items' errors stay when contains fails.
func (vs *vstate) containsKeyword(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	minC, maxC := n.containsMin, n.containsMax
	var valid bool
	switch {
	case maxC >= 0 && minC > maxC:
		valid = false
	case n.contains.alwaysValid():
		valid = len(v.elems) >= minC && (maxC < 0 || len(v.elems) <= maxC)
	default:
		if ev != nil {
			ev.allItems = true
		}
		m := vs.mark()
		valid = vs.countContains(n, v, minC, maxC)
		if valid {
			vs.resetTo(m)
		}
	}
	if !valid {
		vs.report(n.containsMsg)
	}
	return valid
}

func (vs *vstate) countContains(n *schemaNode, v *jsonValue, minC, maxC int) bool {
	valid := minC == 0
	count := 0
	for i := range v.elems {
		if !vs.at(n.contains, &v.elems[i], "", i, nil) {
			continue
		}
		count++
		if maxC < 0 {
			if count >= minC {
				return true
			}
			continue
		}
		if count > maxC {
			return false
		}
		if count >= minC {
			valid = true
		}
	}
	return valid
}

// unique reports the first duplicate pair ajv would find. ajv's hashing loop
// (when "items" has scalar types) names the pair as "## later and earlier";
// its pairwise loop as "## earlier and later".
func (vs *vstate) unique(n *schemaNode, v *jsonValue) bool {
	if len(v.elems) < 2 {
		return true
	}
	a, b, found := vs.findDuplicate(n, v.elems)
	if !found {
		return true
	}
	vs.report("must NOT have duplicate items (items ## " + strconv.Itoa(a) + " and " + strconv.Itoa(b) + " are identical)")
	return false
}

func (vs *vstate) findDuplicate(n *schemaNode, elems []jsonValue) (int, int, bool) {
	skip := func(i int) bool { return n.uniqueFast && !n.uniqueTypes.has(&elems[i]) }
	if len(elems) > 64 {
		return duplicateByKey(elems, skip, n.uniqueFast)
	}
	for i := len(elems) - 1; i > 0; i-- {
		if n.uniqueFast {
			if skip(i - 1) {
				continue
			}
			for j := i; j < len(elems); j++ { // the nearest equal item above i-1
				if !skip(j) && equal(&elems[i-1], &elems[j]) {
					return j, i - 1, true
				}
			}
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if equal(&elems[i], &elems[j]) {
				return j, i, true
			}
		}
	}
	return 0, 0, false
}

// duplicateByKey is findDuplicate for long arrays, grouping equal items by a
// canonical key instead of comparing every pair.
func duplicateByKey(elems []jsonValue, skip func(int) bool, fast bool) (int, int, bool) {
	groups := map[string][]int{}
	var b strings.Builder
	for i := range elems {
		if skip(i) {
			continue
		}
		b.Reset()
		canonical(&b, &elems[i])
		groups[b.String()] = append(groups[b.String()], i)
	}
	best, a, c := -1, 0, 0
	for _, idx := range groups {
		k := len(idx)
		if k < 2 {
			continue
		}
		// pairwise loop: highest later index, paired with the one before it;
		// hashing loop: highest earlier index, paired with the one after it.
		key, x, y := idx[k-1], idx[k-2], idx[k-1]
		if fast {
			key, x, y = idx[k-2], idx[k-1], idx[k-2]
		}
		if key > best {
			best, a, c = key, x, y
		}
	}
	return a, c, best >= 0
}

func (vs *vstate) unevaluatedItems(n *schemaNode, v *jsonValue, ev *evaluated) bool {
	if ev.allItems {
		return true
	}
	from := ev.items
	ev.allItems = true
	if len(v.elems) <= from {
		return true
	}
	if n.unevalItemsFalse {
		vs.report("must NOT have more than " + strconv.Itoa(from) + " items")
		return false
	}
	ok := true
	if !n.unevalItems.alwaysValid() {
		for i := from; i < len(v.elems); i++ {
			ok = vs.at(n.unevalItems, &v.elems[i], "", i, nil) && ok
		}
	}
	return ok
}
