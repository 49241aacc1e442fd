package changes

import (
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"
)

func TestChangeDelivery(t *testing.T) {
	b := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	var got []string
	stop1 := b.Subscribe(func(c Change) { got = append(got, "one:"+string(c.Kind)) })
	b.Subscribe(func(Change) { panic("a broken subscriber") })
	b.Subscribe(func(c Change) { got = append(got, "three:"+c.Key) })

	b.Publish(Change{Project: 1, Kind: KeyRevoked, Key: "k1"})
	if want := []string{"one:key_revoked", "three:k1"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q (in subscription order, past a panicking subscriber)", got, want)
	}
	got = nil
	stop1()
	stop1() // twice is fine
	b.Publish(Change{Project: 1, Kind: Settings})
	if want := []string{"three:"}; !slices.Equal(got, want) {
		t.Fatalf("after cancel: delivered %q, want %q", got, want)
	}
}

func TestChangeNilBus(t *testing.T) {
	var b *Bus
	b.Subscribe(func(Change) { t.Error("a nil bus delivered") })()
	b.Publish(Change{Project: 1, Kind: Settings})
}

func TestChangeSerialisable(t *testing.T) {
	c := Change{Project: 7, Kind: AgentConnected, AgentKeys: []string{"ak_1"}}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"project":7,"kind":"agent_connected","agentKeys":["ak_1"]}`; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	var back Change
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("round trip = %+v, %v; want %+v", back, err, c)
	}
	if !c.Registry() || (Change{Kind: KeyRevoked}).Registry() {
		t.Error("Registry() is wrong")
	}
}
