package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/internal/crashtest"
	"github.com/echostore/echostore/server"
)

// TestServeSealedChild runs serve (server.Open and Run) with the data dir,
// Redis, remote and key file its parent names, trimming after remote,
// reports "A <addr>", and serves until it is killed.
func TestServeSealedChild(t *testing.T) {
	arg, ok := crashtest.Child("TestServeSealedChild")
	if !ok {
		t.Skip("the child of TestServeEncryptedBucket")
	}
	f := strings.Split(arg, "|")
	ctx := context.Background()
	s, err := server.Open(ctx, server.Config{
		Listen: "127.0.0.1:0", Data: f[0], Redis: f[1], Remote: f[2], RemoteKeyFile: f[3], Beat: time.Hour,
		Defaults: server.StreamConfig{TrimAfter: "remote"},
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	crashtest.Report("A %s", s.Addr())
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// startSealed starts a serve child and returns its client.
func startSealed(t *testing.T, arg string) *serveClient {
	t.Helper()
	p := crashtest.Start(t, "TestServeSealedChild", arg)
	line, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(line, "A ")
	if !ok {
		t.Fatalf("child: %q", line)
	}
	return &serveClient{t: t, base: "http://" + addr, p: p, http: &http.Client{Timeout: time.Minute}}
}

// TestServeEncryptedBucket: a real serve process with remote_key_file on a
// real MinIO takes records with distinctive field values (cycled into the
// archive, trimmed after remote) and sync jobs with distinctive payloads,
// and is killed with SIGKILL. Every object of the bucket, listed and read
// directly, holds none of those bytes, raw or through any zstd frame in
// it, and each is an envelope of the key; a serve restarted on the same
// data dir and key reads every record back.
func TestServeEncryptedBucket(t *testing.T) {
	if _, ok := crashtest.Child("TestServeSealedChild"); ok {
		return
	}
	_, rurl := ownMinIO(t, "sealed")
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	kf := filepath.Join(t.TempDir(), "remote.key")
	if err := os.WriteFile(kf, []byte(hex.EncodeToString(raw)), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	arg := strings.Join([]string{data, servers.Redis(t).URL, rurl, kf}, "|")
	c := startSealed(t, arg)
	q := queueName(t)
	tag := make([]byte, 6)
	_, _ = rand.Read(tag)
	mark := hex.EncodeToString(tag)
	const records, keep, jobs = 200, 10, 20
	var marks []string
	var body strings.Builder
	for i := range records {
		m := fmt.Sprintf("SEALEDFIELD-%s-%04d", mark, i)
		marks = append(marks, m)
		fmt.Fprintf(&body, `{"fields":{"v":"%s"}}`+"\n", m)
	}
	req, err := http.NewRequestWithContext(t.Context(), "POST", c.base+"/v1/streams/"+q+"/s", strings.NewReader(body.String()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("append: %d", resp.StatusCode)
	}
	if a := c.do("POST", fmt.Sprintf("/v1/streams/%s/s/cycle?keep=%d", q, keep), nil); a.code != http.StatusOK || a.body["folded"] != float64(records-keep) {
		t.Fatalf("cycle: %d %s", a.code, a.raw)
	}
	var payloads []string
	for i := range jobs {
		p := fmt.Sprintf("SEALEDPAYLOAD-%s-%04d", mark, i)
		payloads = append(payloads, p)
		if a := c.do("POST", "/v1/queues/"+q+"/jobs?mode=sync", map[string]any{"payload": p}); a.code != http.StatusOK {
			t.Fatalf("sync enqueue: %d %s", a.code, a.raw)
		}
	}
	if err := c.p.Kill(); err != nil {
		t.Fatal(err)
	}

	ctx := t.Context()
	st, err := remote.Open(ctx, rurl, drivers.All()...)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	objs, err := st.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := sealed.LoadKeyring(kf, sealed.Key{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := ring.WriteID()
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var opened []byte
	for _, o := range objs {
		b, err := st.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < sealed.HeaderSize || string(b[:4]) != remote.SealedMagic || !bytes.Equal(b[8:16], id[:]) {
			t.Fatalf("object %s is not an envelope of key %s", o.Key, id)
		}
		seen := bytes.Clone(b)
		for i := 0; ; i++ {
			j := bytes.Index(b[i:], []byte{0x28, 0xB5, 0x2F, 0xFD})
			if j < 0 {
				break
			}
			i += j
			if err := dec.Reset(bytes.NewReader(b[i:])); err == nil {
				z, _ := io.ReadAll(dec)
				seen = append(seen, z...)
			}
		}
		if bytes.Contains(seen, []byte(mark)) {
			t.Fatalf("object %s holds the run's field values or payloads in the clear", o.Key)
		}
		p, err := sealed.New(st, ring).Get(ctx, o.Key)
		if err != nil {
			t.Fatalf("object %s with the key: %v", o.Key, err)
		}
		opened = append(opened, p...)
		if _, pages, err := remote.DecodeSegment(p); err == nil {
			for _, pg := range pages {
				opened = append(opened, pg.Data...)
			}
		}
		if cm, err := remote.DecodeCommit(p); err == nil {
			for _, pg := range cm.Inline {
				opened = append(opened, pg.Data...)
			}
		}
	}
	// With the key every archived record and every payload is there: what
	// the grep did not find was in the bucket, sealed.
	for _, m := range slices.Concat(marks[:records-keep], payloads) {
		if !bytes.Contains(opened, []byte(m)) {
			t.Fatalf("%s is in no object opened with the key", m)
		}
	}
	t.Logf("%d objects after SIGKILL: none holds a field value or payload in the clear", len(objs))

	c = startSealed(t, arg)
	req, _ = http.NewRequestWithContext(t.Context(), "GET", c.base+"/v1/streams/"+q+"/s", nil)
	resp, err = c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range marks {
		if !bytes.Contains(got, []byte(m)) {
			t.Fatalf("after the restart the merge-read lacks %s (%d)", m, resp.StatusCode)
		}
	}
}
