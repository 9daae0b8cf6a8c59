package accept

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/names"
)

// TestSecurityOutboxRefusesBadInput: a queue name that could reach a key or
// a path, a zero id and a payload over the limit are refused with typed
// errors before anything is recorded or written.
func TestSecurityOutboxRefusesBadInput(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	o, err := Open(ctx, dir, Options{MaxPayload: 1024, FlushInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A bad queue name cannot be made into an Intent's names.Queue; the
	// zero one (no queue) is refused.
	for _, q := range []string{"", ".", "..", "../x", "/abs", "a\x00b", "x}", "x:y", "é", "a b", strings.Repeat("q", 129)} {
		if _, err := names.ParseQueue(q); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("ParseQueue(%q) = %v, want names.ErrInvalid", q, err)
		}
	}
	if err := o.Record(ctx, Intent{ID: 1, Payload: []byte("x")}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Record(no queue) = %v, want ErrInvalid", err)
	}
	if err := o.Record(ctx, Intent{ID: 0, Queue: qn("q"), Payload: []byte("x")}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Record(id 0) = %v, want ErrInvalid", err)
	}
	if err := o.Record(ctx, Intent{ID: brand.ID(1), Queue: qn("q"), Payload: make([]byte, 1025)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Record(1025 bytes) = %v, want ErrTooLarge", err)
	}
	if err := o.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := o.Len(); n != 0 {
		t.Fatalf("%d intents after refused records", n)
	}
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("files before %v, after %v", before, after)
	}
	// Options that would lift the limits are refused too.
	if _, err := Open(ctx, t.TempDir(), Options{MaxPayload: maxPayloadLimit + 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("MaxPayload above the format's limit: %v", err)
	}
}
