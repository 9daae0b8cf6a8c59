package mq

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/xid"
)

// TestSecurityPasswordNeverInErrorsOrString: whatever the URL's shape, a
// password written in it (percent-encoded or raw, with the characters that
// end a URL's parts) never appears in a parse error or in Endpoint.String,
// the two texts that reach logs.
func TestSecurityPasswordNeverInErrorsOrString(t *testing.T) {
	const pw = "Sup3rS3cret"
	for _, u := range []string{
		"redis://:" + pw + "@h",
		"redis://user:" + pw + "@h:6379/0",
		"redis://user:" + pw + "@h?nope=1",           // unknown option
		"redis://user:" + pw + "@h:99999",            // bad port
		"redis://user:" + pw + "@h/notadb",           // bad path
		"redis://user:" + pw + "%zz@h",               // bad escape in the password
		"redis://:" + pw[:5] + "/" + pw[5:] + "@h",   // raw '/' in the password
		"redis://:" + pw[:5] + "?" + pw[5:] + "@h",   // raw '?' in the password
		"redis://:" + pw[:5] + "," + pw[5:] + "@h",   // raw ',' in the password
		"redis://:" + pw[:5] + "@" + pw[5:] + "@h",   // raw '@' in the password
		"redis://:" + pw[:5] + ":" + pw[5:] + "@h",   // raw ':' in the password
		"redis://:" + pw[:5] + "/" + pw[5:] + "@h/x", // and a bad path
		"rediss://u:" + pw + "@h?skip_verify=maybe",
		"redis://u:" + pw + "@h?skip_verify=true", // TLS option without rediss
	} {
		ep, err := ParseURL(u)
		text := ep.String()
		if err != nil {
			text = err.Error()
			if !errors.Is(err, ErrBadURL) {
				t.Errorf("ParseURL(%q): %v, want ErrBadURL", u, err)
			}
		}
		for _, frag := range []string{pw, pw[:5], pw[5:]} {
			if strings.Contains(text, frag) {
				t.Errorf("ParseURL(%q): %q shows %q of the password", u, text, frag)
			}
		}
	}
}

// TestSecurityRedactKeepsWhatHelps: redaction hides only the password.
func TestSecurityRedactKeepsWhatHelps(t *testing.T) {
	for in, want := range map[string]string{
		"redis://user:pw@h:1/2?db=3": "redis://user:***@h:1/2?db=3",
		"redis://:pw@h":              "redis://:***@h",
		"redis://user@h/0":           "redis://user@h/0",
		"redis://h:1/0":              "redis://h:1/0",
		"redis://:p/w@h/1":           "redis://:***@h/1",
		"redis://:p?w@h":             "redis://:***@h",
		"rediss://u:a@b@h":           "rediss://u:***@h",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSecurityNamesRefusedBeforeRedis: queue and stream names that could
// break out of the key's hashtag or collide with another key cannot be made
// into the checked names every key builder and Client method takes; lane
// names, still strings, are refused by QueueLane.
func TestSecurityNamesRefusedBeforeRedis(t *testing.T) {
	bad := []string{"", ".", "..", "../x", "a/b", "/abs", "x}", "{x", "x:archived", "a b", "a\x00b", "é",
		"\u0430dmin", "a\u200bb", strings.Repeat("a", names.MaxLen+1), "a\nb", "a*", "a?b", "a[1]"}
	parsers := map[string]func(string) error{
		"ParseQueue":            func(n string) error { _, err := names.ParseQueue(n); return err },
		"ParseStreamRef queue":  func(n string) error { _, err := names.ParseStreamRef(n, "s"); return err },
		"ParseStreamRef stream": func(n string) error { _, err := names.ParseStreamRef("q", n); return err },
		"ParseVolume":           func(n string) error { _, err := names.ParseVolume(n); return err },
	}
	for _, n := range bad {
		for what, f := range parsers {
			if err := f(n); !errors.Is(err, names.ErrInvalid) {
				t.Errorf("%s(%q) = %v, want names.ErrInvalid", what, n, err)
			}
		}
		if _, err := QueueLane(mustQueue(t, "q"), n); err == nil {
			t.Errorf("QueueLane lane %q accepted", n)
		}
	}
	if _, err := QueueLane(names.Queue{}, "l"); !errors.Is(err, names.ErrInvalid) {
		t.Errorf("QueueLane(zero queue) = %v, want names.ErrInvalid", err)
	}
	if _, err := VolumeLane(names.Volume{}); !errors.Is(err, names.ErrInvalid) {
		t.Errorf("VolumeLane(zero volume) = %v, want names.ErrInvalid", err)
	}
}

// TestSecurityClientRefusesBadNames: every Client method that builds a key
// from a queue or stream name refuses the zero (no) name with
// names.ErrInvalid, and Redis is left without any key of it; a bad name
// cannot be made into a checked one at all (TestSecurityNamesRefusedBeforeRedis).
func TestSecurityClientRefusesBadNames(t *testing.T) {
	c := plain(t, Options{})
	ctx := testCtx(t)
	var ref names.StreamRef
	var q names.Queue
	calls := map[string]func() error{
		"Append": func() error { _, err := c.Append(ctx, ref, Field{Name: "k", Value: "v"}); return err },
		"AppendBatch": func() error {
			_, err := c.AppendBatch(ctx, ref, [][]Field{{{Name: "k", Value: "v"}}})
			return err
		},
		"Read": func() error {
			for _, err := range c.Read(ctx, ref, xid.Min, xid.Max, 10, false) {
				return err
			}
			return nil
		},
		"Info":      func() error { _, err := c.Info(ctx, ref); return err },
		"Len":       func() error { _, err := c.Len(ctx, ref); return err },
		"SetID":     func() error { _, err := c.SetID(ctx, ref, xid.ID{Seq: 5}); return err },
		"TrimMinID": func() error { _, err := c.TrimMinID(ctx, ref, xid.ID{Seq: 5}); return err },
		"WindowCut": func() error {
			_, _, err := c.WindowCut(ctx, ref, Window{Keep: 1}, time.Now())
			return err
		},
		"Enqueue": func() error {
			_, err := c.Enqueue(ctx, q, Job{Fields: []Field{{Name: "k", Value: "v"}}})
			return err
		},
		"Claim":  func() error { _, err := c.Claim(ctx, q, "c", 1); return err },
		"Status": func() error { _, err := c.Status(ctx, q); return err },
	}
	for what, call := range calls {
		if err := call(); !errors.Is(err, names.ErrInvalid) {
			t.Errorf("%s(no name): %v, want names.ErrInvalid", what, err)
		}
	}
	keys, err := c.rdb.Do(ctx, c.rdb.B().Keys().Pattern("emq:{}*").Build()).AsStrSlice()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left behind: %v, %v", keys, err)
	}
}
