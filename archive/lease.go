package archive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// The archive driver's lease with fencing tokens, the trim that checks the
// lease's token in the same script as the trim, and the fenced delete.

// ErrFenced: a lease-fenced trim, delete or lease renewal found another
// holder's token on the lease (or none): the caller's lease was lost (it
// stalled past the TTL and another driver took over), and it did not trim.
var ErrFenced = errors.New("archive lease lost to another driver")

// lease is the reply of takeLease.
type lease struct {
	// Token is the fencing token of the holder: the caller's when Held is
	// false.
	Token int64
	// Held: another token holds the lease, for TTL more.
	Held bool
	TTL  time.Duration
}

// takeLease takes the archive lease on stream s of queue q for ttl, or
// renews it if token (non-zero) still holds it. A new lease gets a token
// above every token handed out before for this stream. A lease held by
// another token is reported (Held, with its remaining TTL), not waited for.
// Renewing a token that expired and was taken over since fails with
// ErrFenced.
func takeLease(ctx context.Context, live Live, ref names.StreamRef, token int64, ttl time.Duration) (lease, error) {
	if err := checkRef(ref); err != nil {
		return lease{}, err
	}
	if ttl < time.Millisecond {
		return lease{}, fmt.Errorf("lease on %s: ttl %v below 1ms", where(ref), ttl)
	}
	tok := ""
	if token != 0 {
		tok = strconv.FormatInt(token, 10)
	}
	keys := []string{LeaseKey(ref), LeaseSeqKey(ref)}
	args := []string{strconv.FormatInt(ttl.Milliseconds(), 10), tok}
	reply, err := live.Run(ctx, scriptLease, keys, args).Strings()
	if err != nil {
		return lease{}, fmt.Errorf("lease on %s: %w", where(ref), err)
	}
	switch {
	case len(reply) == 1 && reply[0] == "LOST":
		return lease{}, fmt.Errorf("renew lease %d on %s: %w", token, where(ref), ErrFenced)
	case len(reply) == 2 && reply[0] == "OK":
		t, err := strconv.ParseInt(reply[1], 10, 64)
		if err != nil {
			return lease{}, fmt.Errorf("lease on %s: bad token %q", where(ref), reply[1])
		}
		return lease{Token: t}, nil
	case len(reply) == 3 && reply[0] == "HELD":
		t, err1 := strconv.ParseInt(reply[1], 10, 64)
		ms, err2 := strconv.ParseInt(reply[2], 10, 64)
		if err1 != nil || err2 != nil {
			return lease{}, fmt.Errorf("lease on %s: bad reply %q", where(ref), reply)
		}
		if token != 0 {
			return lease{}, fmt.Errorf("renew lease %d on %s: held by %d: %w", token, where(ref), t, ErrFenced)
		}
		return lease{Token: t, Held: true, TTL: time.Duration(ms) * time.Millisecond}, nil
	}
	return lease{}, fmt.Errorf("lease on %s: unexpected reply %q", where(ref), reply)
}

// whileHeld runs f, the cycle's work that renews no lease itself (a push
// of the folds, a pull of another node's), while a goroutine renews lease
// token of ref every ttl/3, so that work longer than the lease (the first
// push of a large stream's history) does not let another node take the
// stream over halfway and fold it all again. The renewals stop when f
// returns, and at the first one that fails (fenced: another node holds
// the lease; the cycle's own renewal before its trim reports it).
func whileHeld[T any](ctx context.Context, live Live, ref names.StreamRef, token int64, ttl time.Duration, f func() (T, error)) (T, error) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(max(ttl/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := takeLease(ctx, live, ref, token, ttl); err != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(done)
		<-stopped
	}()
	return f()
}

// releaseLease gives up the lease on stream s of queue q if token holds
// it, and reports whether it did.
func releaseLease(ctx context.Context, live Live, ref names.StreamRef, token int64) (bool, error) {
	if err := checkRef(ref); err != nil {
		return false, err
	}
	n, err := live.Run(ctx, scriptLeaseRelease, []string{LeaseKey(ref)},
		[]string{strconv.FormatInt(token, 10)}).Int()
	if err != nil {
		return false, fmt.Errorf("release lease on %s: %w", where(ref), err)
	}
	return n == 1, nil
}

// fencedTrim trims stream s of queue q below minID like mq's TrimMinID
// (XTRIM MINID, capped at every consumer group's oldest pending or
// undelivered entry), but only while token holds the stream's archive
// lease; otherwise it trims nothing and fails with ErrFenced. The check and
// the trim are one script (scriptFencedTrim). It trims archived streams: it
// is the archive driver's trim, after its fold. The groups named in pass do
// not cap it (stalled groups under StalledArchive; see groups.go).
func fencedTrim(ctx context.Context, live Live, ref names.StreamRef, token int64, minID xid.ID, pass ...string) (mq.TrimResult, error) {
	if err := checkRef(ref); err != nil {
		return mq.TrimResult{}, err
	}
	keys := []string{mq.StreamKey(ref), LeaseKey(ref)}
	args := append([]string{strconv.FormatInt(token, 10), minID.String()}, pass...)
	reply, err := live.Run(ctx, scriptFencedTrim, keys, args).Strings()
	if err != nil {
		return mq.TrimResult{}, fmt.Errorf("fenced trim %s to %s: %w", where(ref), minID.String(), err)
	}
	switch {
	case len(reply) == 1 && reply[0] == "FENCED":
		return mq.TrimResult{}, fmt.Errorf("trim %s with lease token %d: %w", where(ref), token, ErrFenced)
	case len(reply) == 4 && reply[0] == "OK":
		n, err := strconv.ParseInt(reply[1], 10, 64)
		if err != nil {
			return mq.TrimResult{}, fmt.Errorf("fenced trim %s: bad count %q", where(ref), reply[1])
		}
		return mq.TrimResult{MinXID: reply[2], Trimmed: n, CappedBy: reply[3]}, nil
	}
	return mq.TrimResult{}, fmt.Errorf("fenced trim %s: unexpected reply %q", where(ref), reply)
}

// deleteLiveStream deletes stream s of queue q from the live tier: the
// stream, its seam cache, its membership of the archived set and its
// archive lease, in one script that first checks that token holds the
// stream's lease (take it with takeLease). With another token, or none, on
// the lease it deletes nothing and fails with ErrFenced. The lease's token
// counter is kept. It returns the number of entries the stream held.
func deleteLiveStream(ctx context.Context, live Live, ref names.StreamRef, token int64) (int64, error) {
	if err := checkRef(ref); err != nil {
		return 0, err
	}
	set, member := mq.ArchivedRegistry(ref)
	keys := []string{mq.StreamKey(ref), SeamKey(ref), set, LeaseKey(ref)}
	args := []string{strconv.FormatInt(token, 10), member}
	reply, err := live.Run(ctx, scriptDeleteStream, keys, args).Strings()
	if err != nil {
		return 0, fmt.Errorf("delete %s: %w", where(ref), err)
	}
	switch {
	case len(reply) == 1 && reply[0] == "FENCED":
		return 0, fmt.Errorf("delete %s with lease token %d: %w", where(ref), token, ErrFenced)
	case len(reply) == 2 && reply[0] == "OK":
		n, err := strconv.ParseInt(reply[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("delete %s: bad count %q", where(ref), reply[1])
		}
		return n, nil
	}
	return 0, fmt.Errorf("delete %s: unexpected reply %q", where(ref), reply)
}
