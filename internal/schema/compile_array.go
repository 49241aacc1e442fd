package schema

// Compiling the array keywords: maxItems, minItems, items in its draft-07
// and 2020-12 forms, contains, uniqueItems and unevaluatedItems.

import (
	"strconv"
)

func (k *keywordCompiler) arrayKeywords() error {
	n := k.n
	var err error
	if n.maxItems, err = k.count("maxItems"); err != nil {
		return err
	}
	if n.minItems, err = k.count("minItems"); err != nil {
		return err
	}
	n.maxItemsMsg = "must NOT have more than " + strconv.Itoa(n.maxItems) + " items"
	n.minItemsMsg = "must NOT have fewer than " + strconv.Itoa(n.minItems) + " items"
	if err := k.itemsKeywords(); err != nil {
		return err
	}
	if err := k.containsKeyword(); err != nil {
		return err
	}
	if u := k.v.get("uniqueItems"); u != nil {
		if u.kind != jsonBool {
			return k.errorf("uniqueItems must be a boolean")
		}
		n.uniqueItems = u.boolean
		k.uniqueTypes()
	}
	if n.unevalItems, err = k.sub("unevaluatedItems"); err != nil {
		return err
	}
	if n.unevalItems != nil {
		n.unevalItemsPresent = true
		n.unevalItemsFalse = n.unevalItems.isBool && !n.unevalItems.boolValue
		n.needsEval = true
	}
	n.hasArray = k.hasGroup(typeArray)
	return nil
}

// itemsKeywords compiles items/additionalItems (draft-07) or
// prefixItems/items (2020-12).
func (k *keywordCompiler) itemsKeywords() error {
	n := k.n
	var err error
	tupleKw, extraKw := "items", "additionalItems"
	if k.c.draft2020 {
		tupleKw, extraKw = "prefixItems", "items"
	}
	if it := k.v.get(tupleKw); it != nil && (it.kind == jsonArray || k.c.draft2020) {
		if n.tuple, err = k.subArray(tupleKw, false); err != nil {
			return err
		}
		n.hasTuple = true
		if n.extraItems, err = k.sub(extraKw); err != nil {
			return err
		}
		if n.extraItems != nil {
			n.extraFirst = !k.c.draft2020
			n.extraItemsFalse = n.extraItems.isBool && !n.extraItems.boolValue
			n.extraItemsMsg = "must NOT have more than " + strconv.Itoa(len(n.tuple)) + " items"
		}
		return nil
	}
	n.items, err = k.sub("items")
	return err
}

func (k *keywordCompiler) containsKeyword() error {
	n := k.n
	var err error
	if n.contains, err = k.sub("contains"); err != nil || n.contains == nil {
		return err
	}
	n.containsMin = 1
	if minC, err := k.count("minContains"); err != nil {
		return err
	} else if minC >= 0 {
		n.containsMin = minC
	}
	if n.containsMax, err = k.count("maxContains"); err != nil {
		return err
	}
	// ajv ignores contains when minContains is 0 and there is no maxContains.
	n.containsOn = !(n.containsMax < 0 && n.containsMin == 0)
	n.containsMsg = "must contain at least " + strconv.Itoa(n.containsMin) + " valid item(s)"
	if n.containsMax >= 0 {
		n.containsMsg = "must contain at least " + strconv.Itoa(n.containsMin) + " and no more than " +
			strconv.Itoa(n.containsMax) + " valid item(s)"
	}
	return nil
}

// uniqueTypes records the type of "items" that lets ajv use its hashing
// loop for uniqueItems, which changes the indices its message names.
func (k *keywordCompiler) uniqueTypes() {
	it := k.v.get("items")
	if it == nil || it.kind != jsonObject {
		return
	}
	sub := keywordCompiler{c: k.c, v: it, n: &schemaNode{}, ptr: k.ptr + "/items"}
	if sub.typeKeyword() != nil {
		return
	}
	m := sub.n.types
	if m == 0 || m&(typeObject|typeArray) != 0 {
		return
	}
	k.n.uniqueFast, k.n.uniqueTypes = true, m
}
