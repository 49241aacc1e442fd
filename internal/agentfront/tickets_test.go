package agentfront

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
)

// A key holds at most MaxTicketsPerKey tickets at once; one more is
// refused with a message that names the limit and what to do, and
// tickets free up as they are used or expire. Other keys are not touched.
func TestAgentFrontTicketsPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := newTickets(TicketTTL)
		reg := &agentproto.Registration{Protocol: agentproto.Version}
		issue := func(key string) (string, error) { return ts.issue(key, reg, nil) }
		var first string
		for i := range MaxTicketsPerKey {
			id, err := issue("key_a")
			if err != nil {
				t.Fatalf("ticket %d: %v", i+1, err)
			}
			if i == 0 {
				first = id
			}
			time.Sleep(time.Millisecond) // tickets of different ages
		}
		const want = "This agent key has 1,000 registrations waiting to connect, the most the gateway keeps for one key. " +
			"Connect with the tickets already issued (GET /v1/agent?ticket=…), or wait up to 30 s for unused ones to expire, then register again."
		if _, err := issue("key_a"); err == nil || err.Error() != want {
			t.Fatalf("ticket %d: %v, want %q", MaxTicketsPerKey+1, err, want)
		}
		if _, err := issue("key_b"); err != nil {
			t.Fatalf("another key's ticket: %v", err)
		}

		// Used: one more may be issued, and only one.
		if _, ok := ts.redeem(first, "key_a"); !ok {
			t.Fatal("the first ticket does not redeem")
		}
		if _, err := issue("key_a"); err != nil {
			t.Fatalf("a ticket after one was used: %v", err)
		}
		if _, err := issue("key_a"); err == nil {
			t.Fatal("two tickets issued for one used")
		}

		// Expired: the oldest go first (tickets 2 to 10, issued in the
		// first 10 ms, are past their 30 s now), then all.
		time.Sleep(TicketTTL - time.Duration(MaxTicketsPerKey-10)*time.Millisecond)
		for i := range 9 {
			if _, err := issue("key_a"); err != nil {
				t.Fatalf("ticket %d after the oldest expired: %v", i+1, err)
			}
		}
		if _, err := issue("key_a"); err == nil {
			t.Fatal("a ticket issued for one that has not expired")
		}
		time.Sleep(TicketTTL + time.Millisecond)
		for i := range MaxTicketsPerKey {
			if _, err := issue("key_a"); err != nil {
				t.Fatalf("ticket %d after all expired: %v", i+1, err)
			}
		}
		if n := len(ts.m); n != MaxTicketsPerKey {
			t.Errorf("%d tickets kept, want the %d live ones", n, MaxTicketsPerKey)
		}
	})
}
