package agents

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRegisterAt10000 is one more agent registering in a project
// that has 10,000, each offering a tool of the same name (so every new one
// is suffixed: ping_10001). The cost of a registration, and of the rebuild
// it waits for, must not grow with the agents already connected beyond
// assembling the snapshot.
func BenchmarkRegisterAt10000(b *testing.B) {
	benchRegisterAt10000(b, func(int) string { return "ping" })
}

// BenchmarkRegisterAt10000Distinct is BenchmarkRegisterAt10000 with a tool
// name of its own for every agent: no name is contested.
func BenchmarkRegisterAt10000Distinct(b *testing.B) {
	benchRegisterAt10000(b, func(i int) string { return fmt.Sprintf("ping%d", i) })
}

// benchRegisterAt10000 registers 10,000 agents, agent i offering tool(i),
// then times one more registering (and leaving, untimed) per op.
func benchRegisterAt10000(b *testing.B, tool func(i int) string) {
	r := New(&Options{Grace: time.Hour})
	add := func(i int) *Replica {
		rep := replica(fmt.Sprintf("r%d", i), fmt.Sprintf("k%d", i), reg(fmt.Sprintf("svc%d", i), false, tool(i)))
		r.Add(rep, nil)
		return rep
	}
	for i := range 10000 {
		add(i)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		rep := add(10000 + i)
		b.StopTimer()
		r.Remove(rep)
		r.expire(rep.ProjectID, rep.AgentKey)
		b.StartTimer()
	}
}
