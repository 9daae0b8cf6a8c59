package names

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	good := []string{"a", "orders", "A.b_c-9", strings.Repeat("x", MaxLen), "..a", "a.."}
	for _, s := range good {
		if err := Check(KindStream, s); err != nil {
			t.Errorf("Check(%q) = %v, want nil", s, err)
		}
	}
	bad := []string{"", ".", "..", "a:b", "{a}", "a}", "a/b", "../x", "a b", "é", "a\x00", strings.Repeat("x", MaxLen+1)}
	for _, s := range bad {
		err := Check(KindStream, s)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

func TestDerived(t *testing.T) {
	r, err := ParseStreamRef("q1", "events")
	if err != nil || r.Volume().String() != "archive.q1.events" {
		t.Fatalf("archive volume = %q, %v", r.Volume(), err)
	}
	q, err := ParseQueue("q1")
	if err != nil {
		t.Fatal(err)
	}
	v, err := AcceptVolumeOf(q, 7)
	if err != nil || v.String() != "accept.q1.7" {
		t.Fatalf("AcceptVolumeOf = %q, %v", v, err)
	}
	if _, err := ParseStreamRef("q:1", "s"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ParseStreamRef with bad queue: %v", err)
	}
	if _, err := ParseStreamRef("q", strings.Repeat("s", MaxLen)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("archive volume too long: %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a", "", "a:b", "..", "archive.q.s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := Check(KindVolume, s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if strings.ContainsAny(s, "{}:/ ") || s == "." || s == ".." || len(s) == 0 || len(s) > MaxLen {
			t.Fatalf("accepted %q", s)
		}
	})
}
