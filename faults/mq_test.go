package faults

import (
	"errors"
	"slices"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
)

// TestAppendReplyLostThenLoading: redis-server dies right after running an
// append (the reply is lost) and the client's retry meets the restarted
// server still loading its AOF. The records are in the stream, so the
// append must not be reported as failed: it succeeds, or its error lists
// them as of unknown outcome. (Found by the soak: the append was reported
// failed with nothing unknown.)
func TestAppendReplyLostThenLoading(t *testing.T) {
	ctx := t.Context()
	red := servers.Redis(t)
	proxy := testserver.StartScriptProxy(t, red.Addr)
	c := connect(t, "redis://"+proxy.Addr+"/0")
	direct := connect(t, red.URL)
	q, s := queueName(t), "s"
	if _, err := appendBatch(ctx, c, q, s, 3, 8); err != nil { // scripts loaded, connection warm
		t.Fatal(err)
	}
	proxy.DropReplies(1)
	proxy.AnswerLoading(1)
	ids, err := appendBatch(ctx, c, q, s, 5, 8)
	var in []brand.ID
	for r, rerr := range direct.Read(ctx, mustRef(t, q, s), xid.Min, xid.Max, 0, false) {
		if rerr != nil {
			t.Fatal(rerr)
		}
		id, err := brand.FromXID(r.ID)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, id)
	}
	if len(in) != 8 {
		t.Fatalf("the stream holds %d records, want 8 (the dropped call ran): %v", len(in), err)
	}
	landed := in[3:]
	var ae *mq.AppendError
	switch {
	case err == nil:
		if !slices.Equal(ids, landed) {
			t.Fatalf("append acknowledged %v, the stream holds %v", ids, landed)
		}
	case errors.As(err, &ae):
		if !slices.Equal(ae.Unknown, landed) || len(ae.Appended) != 0 {
			t.Fatalf("append error says appended %v, unknown %v; the stream holds %v: %v", ae.Appended, ae.Unknown, landed, err)
		}
	default:
		t.Fatalf("append failed without saying which records may be in the stream, and they are: %v", err)
	}
	if drops, loading := proxy.Pending(); drops > 0 || loading > 0 {
		t.Fatalf("the proxy did not play the restart (drops %d, loading %d left)", drops, loading)
	}
	t.Logf("append after a lost reply and LOADING: %v", err)
}
