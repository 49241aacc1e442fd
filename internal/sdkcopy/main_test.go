package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"
)

// TestCopiesMatchTheSDK fails when a gateway copy differs from what the
// SDK's source generates: someone edited the copy, or the source without
// running go generate.
func TestCopiesMatchTheSDK(t *testing.T) {
	want, err := copies("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range packages {
		have, err := goFiles(filepath.Join("../../internal", pkg))
		if err != nil {
			t.Fatal(err)
		}
		var wantNames []string
		for p := range want {
			if path.Dir(p) == path.Join("internal", pkg) {
				wantNames = append(wantNames, path.Base(p))
			}
		}
		slices.Sort(wantNames)
		if !slices.Equal(have, wantNames) {
			t.Errorf("internal/%s has %q, core/internal/%s makes %q: run go generate ./internal/sdkcopy", pkg, have, pkg, wantNames)
		}
	}
	for p, b := range want {
		got, err := readFile(p)
		if err != nil {
			continue // reported above
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s is not what core/%s generates: edit the SDK's file, not the copy, and run go generate ./internal/sdkcopy", p, p)
		}
	}
}

// Each copy says it is generated, in the form tools recognise, and imports
// nothing under core/internal.
func TestCopiesAreMarkedGenerated(t *testing.T) {
	want, err := copies("../..")
	if err != nil {
		t.Fatal(err)
	}
	for p, b := range want {
		f, err := parser.ParseFile(token.NewFileSet(), p, b, parser.ParseComments|parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		if !ast.IsGenerated(f) {
			t.Errorf("%s: no Code generated … DO NOT EDIT. line", p)
		}
		for _, imp := range f.Imports {
			if bytes.Contains([]byte(imp.Path.Value), []byte(module+"/core/internal/")) {
				t.Errorf("%s imports %s: the gateway cannot", p, imp.Path.Value)
			}
		}
	}
}

func readFile(p string) ([]byte, error) {
	return os.ReadFile(filepath.Join("../..", filepath.FromSlash(p)))
}
