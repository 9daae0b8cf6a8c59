package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/server"
)

var servers testserver.Pool

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

const token = "client-test-token-0123456789abcdef"

// startServe runs serve on a fresh data dir with an admin token and returns
// it; the test's end stops it.
func startServe(t *testing.T) *server.Server {
	t.Helper()
	r := servers.Redis(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Open(ctx, server.Config{
		Redis: r.URL, Data: filepath.Join(dir, "data"), Remote: "file://" + filepath.Join(dir, "remote"),
		Listen: "127.0.0.1:0", Beat: time.Hour, AllowEviction: true, Token: token,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		cancel()
		t.Fatalf("serve: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv
}

func ref(t *testing.T, q, s string) names.StreamRef {
	t.Helper()
	r, err := names.ParseStreamRef(q, s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestClientStreamsJobsVolumes drives the user contract through the unix
// socket (no token: the socket knows this process's user) and checks the
// typed answers.
func TestClientStreamsJobsVolumes(t *testing.T) {
	srv := startServe(t)
	c := client.Unix(srv.SocketPath(), client.Options{})
	defer c.Close()
	ctx := t.Context()

	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" {
		t.Fatalf("health: %+v %v", h, err)
	}
	qs := ref(t, "q", "s")
	var recs [][]echostore.Field
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		recs = append(recs, []echostore.Field{{Name: "n", Value: v}, {Name: "k", Value: "<&>"}})
	}
	app, err := c.Append(ctx, qs, recs)
	if err != nil || len(app.IDs) != 5 {
		t.Fatalf("append: %+v %v", app, err)
	}
	cyc, err := c.Cycle(ctx, qs, echostore.CycleOptions{Window: echostore.Window{Keep: 2}})
	if err != nil || cyc.Folded != 3 || cyc.Watermark == nil || *cyc.Watermark != app.IDs[2] {
		t.Fatalf("cycle: %+v %v", cyc, err)
	}
	st, err := c.Status(ctx, qs)
	if err != nil || st.Archived != 3 || st.Live != 2 || st.Volume != "archive.q.s" || st.Low != nil {
		t.Fatalf("status: %+v %v", st, err)
	}
	// The merge-read, newest first, over a range across the seam.
	from, _ := brand.EVT.Parse(app.IDs[1])
	to, _ := brand.EVT.Parse(app.IDs[3])
	var got []string
	for rec, err := range c.Read(ctx, qs, echostore.ReadOptions{From: from.XID(), To: to.XID(), Reverse: true}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Fields) != 2 || rec.Fields[1].Value != "<&>" {
			t.Fatalf("record %+v", rec)
		}
		got = append(got, mq.FormatID(rec.ID, mq.IDBranded))
	}
	if len(got) != 3 || got[0] != app.IDs[3] || got[2] != app.IDs[1] {
		t.Fatalf("read %v, want %v reversed", got, app.IDs[1:4])
	}

	jobs, err := names.ParseQueue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.Enqueue(ctx, jobs, []byte(`{"n":1}`), echostore.EnqueueOptions{Mode: echostore.Sync})
	if err != nil || rc.Mode != "sync" || rc.LSN == nil || rc.Volume != "accept.jobs.0" {
		t.Fatalf("enqueue: %+v %v", rc, err)
	}
	batchQ, _ := names.ParseQueue("batchjobs")
	br, err := c.EnqueueBatch(ctx, batchQ, []echostore.BatchJob{{Payload: []byte(`1`)}, {Payload: []byte(`"two"`)}}, echostore.Sync)
	if err != nil || br.Failed != 0 || len(br.Receipts) != 2 || br.Receipts[1].LSN == nil || br.Receipts[0].ID == br.Receipts[1].ID {
		t.Fatalf("enqueue batch: %+v %v", br, err)
	}
	if _, err := c.EnqueueBatch(ctx, batchQ, []echostore.BatchJob{{Payload: []byte(`1`)}, {Payload: []byte(`2`), ID: 1 << 62}}, echostore.Sync); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("enqueue batch with an id ahead of the minter: %v, want ErrInvalid", err)
	}
	// A sync enqueue answers once the job is pushed; it reaches the job
	// stream right after (the tier's dispatch): claim until it is there.
	var cl echostore.ClaimResult
	for deadline := time.Now().Add(10 * time.Second); len(cl.Jobs) == 0 && time.Now().Before(deadline); {
		if cl, err = c.Claim(ctx, jobs, echostore.ClaimOptions{Consumer: "w", Count: 5}); err != nil {
			t.Fatal(err)
		}
		if len(cl.Jobs) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err != nil || len(cl.Jobs) != 1 || brand.JOB.Format(cl.Jobs[0].ID) != rc.ID || cl.Jobs[0].Fields[0].Value != `{"n":1}` {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	if fr, err := c.Fail(ctx, jobs, echostore.FailOptions{Consumer: "other", Entry: cl.Jobs[0].EntryID, Attempt: 1}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("fail by a consumer that does not hold the job: %+v, %v; want ErrNotFound", fr, err)
	}
	ack, err := c.Ack(ctx, jobs, []string{cl.Jobs[0].EntryID})
	if err != nil || ack.Acked != 1 {
		t.Fatalf("ack: %+v %v", ack, err)
	}
	if fr, err := c.Fail(ctx, jobs, echostore.FailOptions{Consumer: "w", Entry: cl.Jobs[0].EntryID, Attempt: 1, Reason: "late"}); err != nil || fr.Failed {
		t.Fatalf("fail after the ack: %+v, %v; want failed false", fr, err)
	}
	dead, err := c.Dead(ctx, jobs, echostore.DeadOptions{})
	if err != nil || dead.Dead == nil || len(dead.Dead) != 0 {
		t.Fatalf("dead: %+v %v", dead, err)
	}
	qst, err := c.QueueStatus(ctx, jobs)
	if err != nil || qst.Queue != "jobs" || qst.Pending != 0 {
		t.Fatalf("queue status: %+v %v", qst, err)
	}
	ready, err := mq.ParseJobState("ready")
	if err != nil {
		t.Fatal(err)
	}
	if jl, err := c.Jobs(ctx, jobs, ready, 10); err != nil || len(jl.Jobs) != 0 {
		t.Fatalf("jobs: %+v %v", jl, err)
	}
	if dd, err := c.DeleteDead(ctx, jobs, []string{"1-1"}); err != nil || dd.Deleted != 0 {
		t.Fatalf("delete dead: %+v %v", dd, err)
	}
	if gl, err := c.Groups(ctx, ref(t, "q", "s")); err != nil || gl.Groups == nil {
		t.Fatalf("groups: %+v %v", gl, err)
	}

	vol := ref(t, "q", "s").Volume()
	if _, err := c.Push(ctx, vol); err != nil {
		t.Fatal(err)
	}
	info, err := c.VolumeInfo(ctx, vol)
	if err != nil || info.Volume.String() != "archive.q.s" || info.RemoteLSN != 1 {
		t.Fatalf("volume info: %+v %v", info, err)
	}
	cp, err := c.Checkpoint(ctx, vol)
	if err != nil || cp.Volume != "archive.q.s" || cp.CheckpointLSN != 2 {
		t.Fatalf("checkpoint: %+v %v", cp, err)
	}
	gc, err := c.GC(ctx, vol, echostore.GCOptions{KeepCheckpoints: 1})
	if err != nil || gc.Horizon != 2 {
		t.Fatalf("gc: %+v %v", gc, err)
	}
	vl, err := c.Volumes(ctx)
	if err != nil || len(vl.Volumes) != 3 { // archive.q.s, accept.jobs.0, accept.batchjobs.0
		t.Fatalf("volumes: %+v %v", vl, err)
	}

	// A missing volume is ErrNotFound, with serve's status and code.
	missing, _ := names.ParseVolume("vol.missing")
	_, err = c.VolumeInfo(ctx, missing)
	var ae *client.Error
	if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != client.CodeNotFound {
		t.Fatalf("info of a missing volume: %v", err)
	}
	if errors.Is(err, client.ErrConflict) {
		t.Fatal("a not_found answer matches ErrConflict")
	}
	del, err := c.Delete(ctx, qs)
	if err != nil || !del.Deleted || del.Volume != "archive.q.s" || !del.VolumeDropped {
		t.Fatalf("delete: %+v %v", del, err)
	}
}

// TestClientToken: on the TCP address a call needs the token; a wrong one
// is ErrUnauthorized.
func TestClientToken(t *testing.T) {
	srv := startServe(t)
	base := "http://" + srv.Addr().String()
	q, _ := names.ParseQueue("jobs")
	bad, err := client.New(base, client.Options{Token: "wrong-token-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.QueueStatus(t.Context(), q)
	var ae *client.Error
	if !errors.Is(err, client.ErrUnauthorized) || !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %v", err)
	}
	good, err := client.New(base, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := good.QueueStatus(t.Context(), q); err != nil || st.Queue != "jobs" {
		t.Fatalf("queue status with the token: %+v %v", st, err)
	}
	if _, err := client.New("ftp://x", client.Options{}); err == nil {
		t.Fatal("an ftp base URL was accepted")
	}
}

// TestErrorRetryAfter: a 503's code and Retry-After reach the *Error, and
// an answer without a code matches its status's sentinel.
func TestErrorRetryAfter(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/volumes" {
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, "plain text")
			return
		}
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":"unavailable","message":"redis is loading"}}`)
	}))
	defer hs.Close()
	c, err := client.New(hs.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := names.ParseQueue("jobs")
	_, err = c.QueueStatus(t.Context(), q)
	if !errors.Is(err, client.ErrUnavailable) || client.RetryAfter(err) != 7*time.Second {
		t.Fatalf("503: %v (retry after %v)", err, client.RetryAfter(err))
	}
	_, err = c.Volumes(t.Context())
	if !errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrUnavailable) || client.RetryAfter(err) != 0 {
		t.Fatalf("409 without a code: %v", err)
	}
}

// TestCodes: the client's codes are serve's.
func TestCodes(t *testing.T) {
	for _, c := range [][2]string{
		{client.CodeBadRequest, server.CodeBadRequest}, {client.CodeInvalidName, server.CodeInvalidName},
		{client.CodeInvalidInput, server.CodeInvalidInput}, {client.CodeUnauthorized, server.CodeUnauthorized},
		{client.CodeForbidden, server.CodeForbidden}, {client.CodePeerRefused, server.CodePeerRefused},
		{client.CodeNotFound, server.CodeNotFound}, {client.CodeMethodNotAllowed, server.CodeMethodNotAllowed},
		{client.CodeTimeout, server.CodeTimeout}, {client.CodeConflict, server.CodeConflict}, {client.CodeGone, server.CodeGone},
		{client.CodeIDConflict, server.CodeIDConflict}, {client.CodeWouldDiscard, server.CodeWouldDiscard},
		{client.CodeWrongType, server.CodeWrongType},
		{client.CodeRemoteMismatch, server.CodeRemoteMismatch}, {client.CodeTooLarge, server.CodeTooLarge},
		{client.CodeTooManyStreams, server.CodeTooManyStreams}, {client.CodeTooManyQueues, server.CodeTooManyQueues},
		{client.CodeInsufficientStorage, server.CodeInsufficientStorage}, {client.CodeUnavailable, server.CodeUnavailable},
		{client.CodeInternal, server.CodeInternal}, {client.CodeCrossSite, server.CodeCrossSite},
		{client.CodeRemoteKey, server.CodeRemoteKey},
		{client.CodeUnsupportedMedia, server.CodeUnsupportedMediaType}, {client.CodeMisdirected, server.CodeMisdirected},
		{client.SocketName, server.SocketName}, {client.DeleteConfirm, server.DeleteConfirm}, {client.DeleteDeadConfirm, server.DeleteDeadConfirm},
	} {
		if c[0] != c[1] {
			t.Errorf("client %q, serve %q", c[0], c[1])
		}
	}
}

// TestAppendLargerThanMaxBody: a batch whose body is larger than serve's
// max_body (8 MiB by default) goes as several requests, in order, each id
// once (it was one body, refused with "request body too large").
func TestAppendLargerThanMaxBody(t *testing.T) {
	srv := startServe(t)
	c := client.Unix(srv.SocketPath(), client.Options{})
	r := ref(t, "big", "s")
	pad := strings.Repeat("x", 500)
	records := make([][]echostore.Field, 20000) // about 11 MB of JSON lines
	for i := range records {
		records[i] = []echostore.Field{{Name: "i", Value: strconv.Itoa(i)}, {Name: "pad", Value: pad}}
	}
	res, err := c.Append(t.Context(), r, records)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IDs) != len(records) {
		t.Fatalf("%d ids for %d records", len(res.IDs), len(records))
	}
	i := 0
	for rec, err := range c.Read(t.Context(), r, echostore.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := rec.Get("i"); v != strconv.Itoa(i) || mq.FormatID(rec.ID, mq.IDBranded) != res.IDs[i] {
			t.Fatalf("record %d: i=%s id %s, want i=%d id %s", i, v, mq.FormatID(rec.ID, mq.IDBranded), i, res.IDs[i])
		}
		i++
	}
	if i != len(records) {
		t.Fatalf("read %d records, want %d", i, len(records))
	}
}
