package resp

import (
	"errors"
	"iter"
	"testing"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/xid"
)

// counted yields n records, then err if set, and records in *closed that
// it returned (as a read closes its snapshot).
func counted(n int, err error, closed *bool) iter.Seq2[echostore.Record, error] {
	return func(yield func(echostore.Record, error) bool) {
		defer func() { *closed = true }()
		for i := range n {
			if !yield(echostore.Record{ID: xid.ID{Ms: uint64(i + 1)}}, nil) {
				return
			}
		}
		if err != nil {
			yield(echostore.Record{}, err)
		}
	}
}

// TestAhead: the read-ahead yields every record in order and the error
// after them; a loop that stops early finds the reading goroutine
// returned.
func TestAhead(t *testing.T) {
	boom := errors.New("boom")
	for _, n := range []int{0, 1, aheadBatch - 1, aheadBatch, aheadBatch + 1, 10*aheadBatch + 3} {
		var closed bool
		got := 0
		var gotErr error
		for rec, err := range ahead(counted(n, boom, &closed)) {
			if err != nil {
				gotErr = err
				continue
			}
			if got++; rec.ID.Ms != uint64(got) {
				t.Fatalf("n=%d: record %d has id %v", n, got, rec.ID)
			}
		}
		if got != n || !errors.Is(gotErr, boom) || !closed {
			t.Fatalf("n=%d: %d records, err %v, closed %v", n, got, gotErr, closed)
		}
	}
	for _, stopAt := range []int{1, aheadBatch, 3*aheadBatch + 5} {
		var closed bool
		got := 0
		for range ahead(counted(10*aheadBatch, nil, &closed)) {
			if got++; got == stopAt {
				break
			}
		}
		if !closed { // no data race: the loop's end waited for the goroutine
			t.Fatalf("stopped at %d: the read is still running", stopAt)
		}
	}
}
