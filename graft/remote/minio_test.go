package remote

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob/s3blob"

	"github.com/echostore/echostore/internal/testserver"
)

// hookStore runs a hook around PutIfAbsent.
type hookStore struct {
	Store
	hook func(put func() error) error
}

func (h *hookStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	put := func() error { return h.Store.PutIfAbsent(ctx, key, data) }
	if h.hook == nil {
		return put()
	}
	return h.hook(put)
}

var errLostReply = errors.New("reply lost")

// TestMinIOKilledMidAppend stops MinIO (SIGKILL) during appends, at three
// points: before the conditional PUT reaches it, after the PUT landed but
// before its reply is seen, and while the PUT is in flight. After a restart
// the retry of the same prepared commit succeeds in every case (it landed,
// or it lands now), and the log is whole: no fork, no corrupt entry.
//
//echostore:fault
func TestMinIOKilledMidAppend(t *testing.T) {
	if _, err := testserver.MinIOBinary(); err != nil {
		testserver.Unavailable(t, err)
	}
	ctx := context.Background()
	m, err := testserver.StartMinIO(ctx)
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { m.Stop() })
	s, _ := minioBucket(t, m)
	hs := &hookStore{Store: s}
	l := mustLog(t, hs, "vol.k")
	base := Entry{}
	for range 3 {
		if base, err = l.Append(ctx, draftOn(base, 4, 100, "w")); err != nil {
			t.Fatal(err)
		}
	}
	kill := func() {
		if err := m.Kill(); err != nil {
			t.Error(err)
		}
	}
	cases := []struct {
		name string
		hook func(put func() error) error
	}{
		{"before the PUT", func(put func() error) error { kill(); return put() }},
		{"after the PUT landed", func(put func() error) error {
			if err := put(); err != nil {
				return err
			}
			kill()
			return errLostReply
		}},
		{"during the PUT", func(put func() error) error {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); kill() }()
			err := put()
			wg.Wait()
			return err
		}},
	}
	for i, c := range cases {
		d := draftOn(base, 30, 4096, "w") // a segment and a commit
		if i == 0 {
			d = draftOn(base, 4, 100, "w") // inline: one PUT
		}
		p, err := l.Prepare(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		hs.hook = c.hook
		tctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = l.Publish(tctx, p)
		cancel()
		hs.hook = nil
		if errors.Is(err, ErrDiverged) {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: publish said %v", c.name, err)
		if err := m.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Publish(ctx, p); err != nil {
			t.Fatalf("%s: retry after restart: %v", c.name, err)
		}
		base = Entry{Commit: p.Commit, Hash: p.Hash}
		oldest, head, err := l.Check(ctx)
		if err != nil || oldest != 1 || head != base.LSN() {
			t.Fatalf("%s: log %d..%d: %v", c.name, oldest, head, err)
		}
		want := map[uint64]uint64{}
		for _, pg := range d.Pages {
			want[pg.Index] = d.LSN
		}
		verifyPages(t, l, base, func(uint64) int { return len(d.Pages[0].Data) }, want)
	}
	// A kill during the segment upload: Prepare fails, and preparing again
	// gives the same commit.
	d := draftOn(base, 30, 4096, "w")
	kill()
	if _, err := l.Prepare(ctx, d); err == nil {
		t.Fatal("prepare with MinIO down succeeded")
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Check(ctx); err != nil {
		t.Fatal(err)
	}
}

// countingTransport counts HTTP requests by method.
type countingTransport struct {
	next        http.RoundTripper
	get, others atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		c.get.Add(1)
	} else {
		c.others.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestHeadIsOneHTTPRequest: on a real S3 server the head lookup is one
// HTTP request (a ListObjectsV2 with max-keys 1), however long the log.
func TestHeadIsOneHTTPRequest(t *testing.T) {
	ctx := context.Background()
	m := servers.MinIO(t)
	plain, u := minioBucket(t, m)
	ct := &countingTransport{next: http.DefaultTransport}
	client := s3.New(s3.Options{
		Region: testserver.MinIORegion, BaseEndpoint: aws.String(m.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(testserver.MinIOAccessKey, testserver.MinIOSecretKey, ""),
		HTTPClient:  &http.Client{Transport: ct},
	})
	objs, err := plain.List(ctx, "", 0)
	if err != nil || len(objs) != 0 {
		t.Fatalf("fresh bucket: %v %v", objs, err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s3blob.OpenBucket(ctx, client, pu.Host, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newS3Store(b)
	defer s.Close()
	l := mustLog(t, s, "vol.n")
	base := Entry{}
	for range 40 {
		if base, err = l.Append(ctx, draftOn(base, 1, 10, "")); err != nil {
			t.Fatal(err)
		}
	}
	ct.get.Store(0)
	ct.others.Store(0)
	lsn, err := l.Head(ctx)
	if err != nil || lsn != 40 {
		t.Fatalf("Head = %d, %v", lsn, err)
	}
	if g, o := ct.get.Load(), ct.others.Load(); g != 1 || o != 0 {
		t.Fatalf("head lookup took %d GET and %d other HTTP requests, want one LIST (a GET)", g, o)
	}
}
