package schemagen

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type searchOrdersInput struct {
	Customer string `json:"customer" desc:"Customer handle, for example \"ada\""`
	Status   string `json:"status,omitempty" desc:"Only orders in this status" enum:"open,shipped,cancelled"`
	Limit    int    `json:"limit,omitempty" desc:"How many orders to return (1 to 50)" min:"1" max:"50" default:"10"`
}

type reflBase struct {
	ID      string `json:"id"`
	Created time.Time
}

type reflEmbedded struct {
	reflBase
	*reflMore
	Name string `json:"name"`
	//lint:ignore U1000 an unexported field the generator must skip
	ignored int
	Skip    string `json:"-"`
}

type reflMore struct {
	Note string `json:"note,omitempty"`
	Name string `json:"name"` // shadowed by the shallower reflEmbedded.Name
}

type reflConflictA struct{ X int }
type reflConflictB struct{ X int }
type reflConflict struct {
	reflConflictA
	reflConflictB
	Y int `json:"y"`
}

type reflTree struct {
	Value    int         `json:"value"`
	Children []*reflTree `json:"children,omitempty"`
}

type reflHasNode struct {
	Root reflNodeT `json:"root"`
}

type reflNodeT struct {
	Name string     `json:"name"`
	Next *reflNodeT `json:"next,omitempty"`
}

type reflKinds struct {
	B     bool              `json:"b"`
	I8    int8              `json:"i8"`
	U     uint              `json:"u"`
	F     float64           `json:"f"`
	Bytes []byte            `json:"bytes"`
	Raw   json.RawMessage   `json:"raw"`
	Any   any               `json:"any"`
	Tags  []string          `json:"tags" enum:"a,b" minItems:"1" maxItems:"3"`
	Nums  [2]int            `json:"nums" min:"0"`
	M     map[string]int    `json:"m,omitempty"`
	P     *string           `json:"p,omitempty" minLength:"2" maxLength:"5" pattern:"^[a-z]+$"`
	Addr  netip.Addr        `json:"addr" format:"ipv4"`
	When  *time.Time        `json:"when,omitzero"`
	Quote int               `json:"quote,string"`
	Inner struct{ A int }   `json:"inner" desc:"inline"`
	Def   []int             `json:"def" default:"[1, 2]"`
	Flags map[string][]bool `json:"flags"`
	Ratio float32           `json:"ratio" min:"0.5" max:"1e3" enum:"0.5,1"`
	Yes   bool              `json:"yes" default:"true" enum:"true"`
}

type reflOut struct {
	Items []string          `json:"items"`
	Ptr   *reflOutInner     `json:"ptr"`
	Kind  *string           `json:"kind,omitempty" enum:"x,y"`
	Map   map[string]string `json:"map"`
	N     int               `json:"n"`
}

type reflOutInner struct {
	A int `json:"a"`
}

func TestFor(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		opts ForOptions
		want string
	}{
		{
			name: "seed SearchOrdersInput",
			typ:  reflect.TypeFor[searchOrdersInput](),
			want: `{"type":"object","properties":{"customer":{"type":"string","description":"Customer handle, for example \"ada\""},"status":{"type":"string","description":"Only orders in this status","enum":["open","shipped","cancelled"]},"limit":{"type":"integer","description":"How many orders to return (1 to 50)","minimum":1,"maximum":50,"default":10}},"required":["customer"]}`,
		},
		{
			name: "pointer to struct, strict",
			typ:  reflect.TypeFor[*searchOrdersInput](),
			opts: ForOptions{Strict: true},
			want: `{"type":"object","properties":{"customer":{"type":"string","description":"Customer handle, for example \"ada\""},"status":{"type":"string","description":"Only orders in this status","enum":["open","shipped","cancelled"]},"limit":{"type":"integer","description":"How many orders to return (1 to 50)","minimum":1,"maximum":50,"default":10}},"required":["customer"],"additionalProperties":false}`,
		},
		{
			name: "empty struct",
			typ:  reflect.TypeFor[struct{}](),
			want: `{"type":"object","properties":{}}`,
		},
		{
			name: "embedded structs flatten like encoding/json",
			typ:  reflect.TypeFor[reflEmbedded](),
			want: `{"type":"object","properties":{"id":{"type":"string"},"Created":{"type":"string","format":"date-time"},"note":{"type":"string"},"name":{"type":"string"}},"required":["id","Created","name"]}`,
		},
		{
			name: "ambiguous embedded fields are dropped",
			typ:  reflect.TypeFor[reflConflict](),
			want: `{"type":"object","properties":{"y":{"type":"integer"}},"required":["y"]}`,
		},
		{
			name: "kinds and tags",
			typ:  reflect.TypeFor[reflKinds](),
			opts: ForOptions{Strict: true},
			want: `{"type":"object","properties":{` +
				`"b":{"type":"boolean"},` +
				`"i8":{"type":"integer"},` +
				`"u":{"type":"integer","minimum":0},` +
				`"f":{"type":"number"},` +
				`"bytes":{"type":"string","contentEncoding":"base64"},` +
				`"raw":{},` +
				`"any":{},` +
				`"tags":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","enum":["a","b"]}},` +
				`"nums":{"type":"array","items":{"type":"integer","minimum":0}},` +
				`"m":{"type":"object","additionalProperties":{"type":"integer"}},` +
				`"p":{"type":"string","minLength":2,"maxLength":5,"pattern":"^[a-z]+$"},` +
				`"addr":{"type":"string","format":"ipv4"},` +
				`"when":{"type":"string","format":"date-time"},` +
				`"quote":{"type":"string"},` +
				`"inner":{"type":"object","description":"inline","properties":{"A":{"type":"integer"}},"required":["A"],"additionalProperties":false},` +
				`"def":{"type":"array","items":{"type":"integer"},"default":[1,2]},` +
				`"flags":{"type":"object","additionalProperties":{"type":"array","items":{"type":"boolean"}}},` +
				`"ratio":{"type":"number","enum":[0.5,1],"minimum":0.5,"maximum":1000},` +
				`"yes":{"type":"boolean","enum":[true],"default":true}` +
				`},"required":["b","i8","u","f","bytes","raw","any","tags","nums","addr","quote","inner","def","flags","ratio","yes"],"additionalProperties":false}`,
		},
		{
			name: "recursive top level refers to #",
			typ:  reflect.TypeFor[reflTree](),
			want: `{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["value"]}`,
		},
		{
			name: "recursive nested type goes to $defs",
			typ:  reflect.TypeFor[reflHasNode](),
			want: `{"type":"object","properties":{"root":{"$ref":"#/$defs/reflNodeT"}},"required":["root"],"$defs":{"reflNodeT":{"type":"object","properties":{"name":{"type":"string"},"next":{"$ref":"#/$defs/reflNodeT"}},"required":["name"]}}}`,
		},
		{
			name: "output allows null where encoding/json writes it",
			typ:  reflect.TypeFor[reflOut](),
			opts: ForOptions{Output: true},
			want: `{"type":"object","properties":{` +
				`"items":{"type":["array","null"],"items":{"type":"string"}},` +
				`"ptr":{"type":["object","null"],"properties":{"a":{"type":"integer"}},"required":["a"]},` +
				`"kind":{"type":["string","null"],"enum":["x","y",null]},` +
				`"map":{"type":["object","null"],"additionalProperties":{"type":"string"}},` +
				`"n":{"type":"integer"}},"required":["items","ptr","map","n"]}`,
		},
		{
			name: "output recursion through a pointer",
			typ:  reflect.TypeFor[reflHasNode](),
			opts: ForOptions{Output: true},
			want: `{"type":"object","properties":{"root":{"$ref":"#/$defs/reflNodeT"}},"required":["root"],"$defs":{"reflNodeT":{"type":"object","properties":{"name":{"type":"string"},"next":{"anyOf":[{"$ref":"#/$defs/reflNodeT"},{"type":"null"}]}},"required":["name"]}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := For(tt.typ, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("For(%s) mismatch (-want +got):\n%s", tt.typ, diff)
			}
			if !json.Valid(got) {
				t.Errorf("For(%s) is not valid JSON", tt.typ)
			}
		})
	}
}

func TestForDeterministic(t *testing.T) {
	first, err := For(reflect.TypeFor[reflKinds](), ForOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, _ := For(reflect.TypeFor[reflKinds](), ForOptions{})
		if diff := cmp.Diff(string(first), string(again)); diff != "" {
			t.Fatalf("For is not deterministic:\n%s", diff)
		}
	}
}

func TestForErrors(t *testing.T) {
	tests := []struct {
		name    string
		typ     reflect.Type
		wantErr string // substring
		notObj  bool
	}{
		{name: "int", typ: reflect.TypeFor[int](), wantErr: "must be a struct", notObj: true},
		{name: "map", typ: reflect.TypeFor[map[string]any](), wantErr: "must be a struct", notObj: true},
		{name: "time.Time", typ: reflect.TypeFor[time.Time](), wantErr: "must be a struct", notObj: true},
		{name: "nil", typ: nil, wantErr: "must be a struct", notObj: true},
		{
			name: "min on a string",
			typ: reflect.TypeFor[struct {
				S string `min:"1"`
			}](),
			wantErr: "field S: tag min applies to numbers, not type string",
		},
		{
			name: "unparsable max",
			typ: reflect.TypeFor[struct {
				Limit int `json:"limit" max:"fifty"`
			}](),
			wantErr: `field Limit: tag max="fifty": not an integer`,
		},
		{
			name:    "enum not an int",
			typ:     reflect.TypeFor[searchBad](),
			wantErr: `field searchBad.Level: tag enum="1,two": "two": not an integer`,
		},
		{
			name: "negative enum on uint",
			typ: reflect.TypeFor[struct {
				U uint `enum:"-1"`
			}](),
			wantErr: `tag enum="-1": "-1": not 0 or more`,
		},
		{
			name: "default not a bool",
			typ: reflect.TypeFor[struct {
				B bool `default:"yes"`
			}](),
			wantErr: `field B: tag default="yes": not true or false`,
		},
		{
			name: "default not JSON for a slice",
			typ: reflect.TypeFor[struct {
				L []int `default:"1,2"`
			}](),
			wantErr: `tag default="1,2": not JSON`,
		},
		{
			name: "minItems on a string",
			typ: reflect.TypeFor[struct {
				S string `minItems:"1"`
			}](),
			wantErr: "tag minItems applies to slices and arrays, not type string",
		},
		{
			name: "minLength negative",
			typ: reflect.TypeFor[struct {
				S string `minLength:"-1"`
			}](),
			wantErr: `tag minLength="-1": not a whole number of 0 or more`,
		},
		{
			name: "bad pattern",
			typ: reflect.TypeFor[struct {
				S string `pattern:"("`
			}](),
			wantErr: `tag pattern="("`,
		},
		{
			name: "backreference pattern",
			typ: reflect.TypeFor[struct {
				S string `pattern:"(a)\\1"`
			}](),
			wantErr: `tag pattern="(a)\\1": use JavaScript regular expression syntax without lookaround`,
		},
		{
			name: "min above max",
			typ: reflect.TypeFor[struct {
				N int `min:"5" max:"1"`
			}](),
			wantErr: "tag min=5 is above max=1",
		},
		{
			name: "enum on a struct",
			typ: reflect.TypeFor[struct {
				In reflOutInner `enum:"a"`
			}](),
			wantErr: "tag enum does not apply to a struct",
		},
		{
			name:    "channel",
			typ:     reflect.TypeFor[struct{ C chan int }](),
			wantErr: "field C: type chan int has no JSON form",
		},
		{
			name:    "int map keys",
			typ:     reflect.TypeFor[struct{ M map[int]string }](),
			wantErr: "field M: map key type int is not a string",
		},
		{
			name:    "nested field path",
			typ:     reflect.TypeFor[reflNested](),
			wantErr: "field reflOutInnerBad.F: type func() has no JSON form",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := For(tt.typ, ForOptions{})
			if err == nil {
				t.Fatalf("For(%v) = %s, want an error", tt.typ, got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("For(%v) error = %q, want it to contain %q", tt.typ, err, tt.wantErr)
			}
			if got := errors.Is(err, ErrNotStruct); got != tt.notObj {
				t.Errorf("errors.Is(err, ErrNotStruct) = %v, want %v", got, tt.notObj)
			}
		})
	}
}

type searchBad struct {
	Level int `json:"level" enum:"1,two"`
}

type reflNested struct {
	Inner reflOutInnerBad `json:"inner"`
}

type reflOutInnerBad struct {
	F func()
}
