package main

import (
	"context"
	"strings"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// TestLiveCommandsBesideTheDataDirHolder: the commands that need Redis
// alone (stream append, stream read --live-only, the queue commands but
// enqueue) run while another process holds --data, instead of waiting for
// its lock and failing with ErrDataLocked.
func TestLiveCommandsBesideTheDataDirHolder(t *testing.T) {
	r := startRedis(t)
	data := t.TempDir()
	ctx := context.Background()
	holder, err := echostore.Open(ctx, echostore.Config{Data: data, Redis: r.URL, DeferJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })

	g := []string{"--data", data, "--redis", r.URL}
	out, stderr, err := run(t, "", append([]string{"stream", "append", "q", "s", "k=v"}, g...)...)
	if err != nil {
		t.Fatalf("stream append beside the holder: %v\n%s", err, stderr)
	}
	id := strings.TrimSpace(out)
	if !strings.HasPrefix(id, "EVT_") {
		t.Fatalf("stream append printed %q, want one EVT_ id", out)
	}
	out, stderr, err = run(t, "", append([]string{"stream", "read", "q", "s", "--live-only"}, g...)...)
	if err != nil {
		t.Fatalf("stream read --live-only beside the holder: %v\n%s", err, stderr)
	}
	if want := `{"id":"` + id + `","fields":{"k":"v"}}` + "\n"; out != want {
		t.Fatalf("stream read --live-only = %q, want %q", out, want)
	}
	for _, args := range [][]string{
		{"queue", "status", "jobs"},
		{"queue", "claim", "jobs", "--consumer", "c1"},
		{"queue", "dead", "jobs"},
	} {
		if _, stderr, err := run(t, "", append(args, g...)...); err != nil {
			t.Fatalf("%s beside the holder: %v\n%s", strings.Join(args, " "), err, stderr)
		}
	}
	// The holder sees what the live-only command appended.
	var got []string
	ref, err := names.ParseStreamRef("q", "s")
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range holder.Read(ctx, ref, echostore.ReadOptions{Side: echostore.ReadLiveOnly}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, mq.FormatID(rec.ID, mq.IDBranded))
	}
	if len(got) != 1 || got[0] != id {
		t.Fatalf("the holder reads %v, want [%s]", got, id)
	}
}
