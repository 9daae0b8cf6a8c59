package client_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/internal/testserver"
	"github.com/echostore/echostore/names"
)

// TestClientKeyStreams: the client's methods on streams at keys that need
// escaping in a path (a '/', a space, '%', "..", "."): an application's
// entries XADDed to the key are cycled, merge-read with their Redis ids,
// described and deleted through serve; a cycle of a key that does not
// exist is refused as not found and registers nothing.
func TestClientKeyStreams(t *testing.T) {
	srv := startServe(t)
	c := client.Unix(srv.SocketPath(), client.Options{})
	defer c.Close()
	ctx := t.Context()
	addr := servers.Redis(t).Addr
	for i, k := range []string{"app/orders eu%2F", "..", ".", "{t}:x?y#z"} {
		key, err := names.ParseKey(k)
		if err != nil {
			t.Fatal(err)
		}
		ref := names.KeyRef(key)
		if _, err := c.Cycle(ctx, ref, echostore.CycleOptions{Window: archive.Window{Keep: 1}}); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("%q: cycle of a missing key: %v, want not found", k, err)
		}
		for j := range 4 {
			if _, err := testserver.Do(ctx, addr, "XADD", k, fmt.Sprintf("1733052000%03d-%d", j, i), "n", strconv.Itoa(j)); err != nil {
				t.Fatal(err)
			}
		}
		res, err := c.Cycle(ctx, ref, echostore.CycleOptions{Window: archive.Window{Keep: 1}})
		want := fmt.Sprintf("1733052000002-%d", i)
		if err != nil || res.Folded != 3 || res.Watermark == nil || *res.Watermark != want {
			t.Fatalf("%q: cycle: %+v %v", k, res, err)
		}
		var got []string
		for rec, err := range c.Read(ctx, ref, echostore.ReadOptions{}) {
			if err != nil {
				t.Fatalf("%q: read: %v", k, err)
			}
			got = append(got, rec.ID.String()+"="+rec.Fields[0].Value)
		}
		if fmt.Sprint(got) != fmt.Sprintf("[1733052000000-%d=0 1733052000001-%d=1 1733052000002-%d=2 1733052000003-%d=3]", i, i, i, i) {
			t.Fatalf("%q: merge-read %v", k, got)
		}
		st, err := c.Status(ctx, ref)
		if err != nil || st.Watermark == nil || *st.Watermark != want || st.Live != 1 || st.Volume != ref.Volume().String() {
			t.Fatalf("%q: status %+v %v", k, st, err)
		}
		app, err := c.Append(ctx, ref, [][]echostore.Field{{{Name: "n", Value: "4"}}})
		if err != nil || len(app.IDs) != 1 {
			t.Fatalf("%q: append %+v %v", k, app, err)
		}
		if _, err := names.ParseKey(app.IDs[0]); err != nil || app.IDs[0][0] == 'E' {
			t.Fatalf("%q: append printed %q, want a Redis id", k, app.IDs[0])
		}
		del, err := c.Delete(ctx, ref)
		if err != nil || !del.Deleted || del.Volume != ref.Volume().String() {
			t.Fatalf("%q: delete %+v %v", k, del, err)
		}
		if n, err := testserver.Do(ctx, addr, "EXISTS", k); err != nil || n != "0" {
			t.Fatalf("%q: EXISTS after delete: %q %v", k, n, err)
		}
	}
}
