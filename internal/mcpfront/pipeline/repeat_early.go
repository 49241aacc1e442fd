package pipeline

import (
	"bytes"
	"context"
	"time"

	"github.com/spacefix/spacefix/internal/agentproto"
	"github.com/spacefix/spacefix/internal/agents"
	"github.com/spacefix/spacefix/internal/mcpfront/wire"
	"github.com/spacefix/spacefix/internal/store"
)

// ReplayEarly answers, before go-sdk, a repeat of a request id whose first
// run finished: the recorded result in the era's encoding, and the
// function that logs the replay once it is sent. It reads the record (or
// this gateway's copy of it) and writes nothing, as a cache hit does;
// anything else (a new id, a run in flight, an unknown outcome, other
// arguments) returns nil, and go-sdk's path decides ([Pipeline.repeat]).
func (f *Pipeline) ReplayEarly(ctx context.Context, key store.Key, t *agents.Tool, call wire.Call, modern bool) ([]byte, func()) {
	rs := f.repeats
	if rs == nil || rs.st == nil {
		return nil, nil
	}
	args, instance, err := prepareArgs(t, call.Args)
	if err != nil {
		return nil, nil
	}
	if s := commonSchema(t, instance); s == nil || s.Validate(args) != nil {
		return nil, nil
	}
	id, ok := requestID(t, args)
	if !ok {
		return nil, nil
	}
	idHash, err := f.requestKey(ctx, key, id)
	if err != nil {
		return nil, nil // go-sdk's path says so
	}
	start := time.Now()
	d := f.doneRecord(ctx, key.ProjectID, t, idHash, start)
	if d == nil || !bytes.Equal(d.argsHash, argsHash(args)) {
		return nil, nil
	}
	b := d.legacy
	if modern {
		b = d.modern
	}
	return b, func() {
		errText := ""
		if d.out.IsError {
			errText = FirstText(d.out)
		}
		f.calls.Add(store.Call{
			Time: start, ProjectID: key.ProjectID, Kind: agentproto.KindTool, Name: t.Name,
			KeyID: key.ID, Agent: t.AgentKey, Duration: time.Since(start), Outcome: d.outcome,
			Error: errText, Replay: true, RetryOf: d.callID,
		})
	}
}

// doneRecord returns the finished record of t under idHash
// ([Pipeline.requestKey]), from this gateway's copy or the store, or nil if
// it is not finished (or gone).
func (f *Pipeline) doneRecord(ctx context.Context, projectID int64, t *agents.Tool, idHash []byte, now time.Time) *doneRecord {
	rs := f.repeats
	k := recordKey(projectID, t.Name, idHash)
	rs.doneMu.Lock()
	d := rs.done[k]
	rs.doneMu.Unlock()
	if d != nil && d.expires.After(now) {
		return d
	}
	stood, err := rs.st.Request(ctx, projectID, t.Name, idHash)
	if err != nil || stood.State != store.RequestDone || !stood.ExpiresAt.After(now) {
		return nil
	}
	out, err := DecodeResult(stood.Result)
	if err != nil {
		return nil
	}
	legacy, err1 := wire.EncodeResult(out, false, f.impl)
	modern, err2 := wire.EncodeResult(out, true, f.impl)
	if err1 != nil || err2 != nil {
		return nil
	}
	d = &doneRecord{argsHash: stood.ArgsHash, legacy: legacy, modern: modern, out: out,
		callID: stood.CallID, outcome: stood.Outcome, expires: stood.ExpiresAt}
	rs.doneMu.Lock()
	if len(rs.done) >= maxDoneKept {
		clear(rs.done)
	}
	rs.done[k] = d
	rs.doneMu.Unlock()
	return d
}
