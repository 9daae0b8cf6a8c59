package names_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/echostore/echostore/names"
)

func TestStreamRefChecksTheVolumeOnce(t *testing.T) {
	long := strings.Repeat("q", 64)
	q, err := names.ParseQueue(long)
	if err != nil {
		t.Fatal(err)
	}
	s, err := names.ParseStream(long)
	if err != nil {
		t.Fatal(err)
	}
	// Two valid names whose archive volume is over MaxLen.
	if _, err := names.NewStreamRef(q, s); !errors.Is(err, names.ErrInvalid) {
		t.Fatalf("NewStreamRef(64 bytes, 64 bytes) = %v, want ErrInvalid", err)
	}
	if _, err := names.NewStreamRef(names.Queue{}, s); !errors.Is(err, names.ErrInvalid) {
		t.Fatalf("NewStreamRef(zero queue) = %v, want ErrInvalid", err)
	}
	r, err := names.ParseStreamRef("orders", "eu")
	if err != nil {
		t.Fatal(err)
	}
	if r.Volume().String() != "archive.orders.eu" || r.String() != "orders/eu" || r.Queue().String() != "orders" || r.Stream().String() != "eu" {
		t.Fatalf("ref %v: volume %v", r, r.Volume())
	}
}

func TestParseRefusesWhatCheckRefuses(t *testing.T) {
	for _, s := range []string{"", ".", "..", "a/b", "a{b}", "a:b", strings.Repeat("x", names.MaxLen+1)} {
		if _, err := names.ParseQueue(s); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("ParseQueue(%q) = %v, want ErrInvalid", s, err)
		}
		if _, err := names.ParseStream(s); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("ParseStream(%q) = %v, want ErrInvalid", s, err)
		}
	}
	if _, err := names.ParseVolume(".tmp"); !errors.Is(err, names.ErrInvalid) {
		t.Errorf("ParseVolume(.tmp) = %v, want ErrInvalid", err)
	}
}

func TestNamesDecodeChecked(t *testing.T) {
	var v struct {
		Q names.Queue  `json:"q"`
		S names.Stream `json:"s"`
	}
	if err := json.Unmarshal([]byte(`{"q":"orders","s":"a/b"}`), &v); !errors.Is(err, names.ErrInvalid) {
		t.Fatalf("decoding a bad stream name: %v, want ErrInvalid", err)
	}
	if err := json.Unmarshal([]byte(`{"q":"orders","s":"eu"}`), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) != `{"q":"orders","s":"eu"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
}

func TestAcceptVolumeOf(t *testing.T) {
	q, _ := names.ParseQueue("jobs")
	v, err := names.AcceptVolumeOf(q, 3)
	if err != nil || v.String() != "accept.jobs.3" {
		t.Fatalf("AcceptVolumeOf = %v, %v", v, err)
	}
	if _, err := names.AcceptVolumeOf(names.Queue{}, 3); !errors.Is(err, names.ErrInvalid) {
		t.Fatalf("AcceptVolumeOf(zero) = %v", err)
	}
}

func ExampleParseStreamRef() {
	r, err := names.ParseStreamRef("orders", "eu")
	if err != nil {
		panic(err)
	}
	fmt.Println(r, r.Volume())
	_, err = names.ParseStreamRef("orders", "eu/../x")
	fmt.Println(errors.Is(err, names.ErrInvalid))
	// Output:
	// orders/eu archive.orders.eu
	// true
}

// TestLogAttr: a stream of a queue logs as queue=Q stream=S, a stream at
// a key as key=K, inline among the line's other attributes.
func TestLogAttr(t *testing.T) {
	qs, err := names.ParseStreamRef("shop", "orders")
	if err != nil {
		t.Fatal(err)
	}
	k, err := names.ParseKeyRef("app:orders")
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[names.StreamRef]string{qs: "msg=m queue=shop stream=orders err=x\n", k: "msg=m key=app:orders err=x\n"} {
		var b bytes.Buffer
		log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
				return slog.Attr{}
			}
			return a
		}}))
		log.Info("m", ref.LogAttr(), "err", "x")
		if b.String() != want {
			t.Errorf("%s logs as %q, want %q", ref, b.String(), want)
		}
	}
}
