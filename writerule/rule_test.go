package writerule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/echostore/echostore/xid"
)

// fakeKeys is a Keys over a map: the keys in it are archived streams, with
// their watermark (nil: nothing folded yet). It counts the questions, and
// a key named "lookup-fails" fails them.
type fakeKeys struct {
	w     map[string]*xid.ID
	asked int
}

var errLookup = errors.New("lookup failed")

func (k *fakeKeys) Bounded(_ context.Context, key []byte) (bool, error) {
	k.asked++
	if string(key) == "lookup-fails" {
		return false, errLookup
	}
	_, ok := k.w[string(key)]
	return ok, nil
}

func (k *fakeKeys) Watermark(_ context.Context, key []byte) (xid.ID, bool, error) {
	k.asked++
	w := k.w[string(key)]
	if w == nil {
		return xid.ID{}, false, nil
	}
	return *w, true, nil
}

// tableKeys are the keys of testdata/rule.txt: orders (an application's
// key) archived with W 100-5, emq:{shop}:stream:created archived with W
// 50-0, fresh archived with nothing folded yet.
func tableKeys() *fakeKeys {
	id := func(s string) *xid.ID {
		w, err := xid.Parse(s)
		if err != nil {
			panic(err)
		}
		return &w
	}
	return &fakeKeys{w: map[string]*xid.ID{
		"orders":                    id("100-5"),
		"emq:{shop}:stream:created": id("50-0"),
		"fresh":                     nil,
	}}
}

// words splits a table line: words separated by spaces, a word in double
// quotes read by strconv.Unquote ("" is the empty argument, "a\x00b" one
// with a NUL).
func words(t *testing.T, line string) [][]byte {
	t.Helper()
	var out [][]byte
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		if line[0] == '"' {
			end := 1
			for end < len(line) && (line[end] != '"' || line[end-1] == '\\') {
				end++
			}
			w, err := strconv.Unquote(line[:end+1])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			out = append(out, []byte(w))
			line = line[end+1:]
			continue
		}
		w, rest, _ := strings.Cut(line, " ")
		out = append(out, []byte(w))
		line = rest
	}
	return out
}

func verdict(t *testing.T, args [][]byte, sc Scope) string {
	t.Helper()
	v, err := Check(context.Background(), args, sc, tableKeys())
	switch {
	case err != nil:
		return "error: " + err.Error()
	case v.Allowed:
		if v.Reply() != "" {
			t.Fatalf("an allowed verdict has a reply %q", v.Reply())
		}
		return "allowed"
	}
	if !strings.HasPrefix(v.Reply(), Prefix) {
		t.Fatalf("reply %q does not start with %q", v.Reply(), Prefix)
	}
	if v.Key == nil {
		return "refused"
	}
	return fmt.Sprintf("refused %s %q", v.Role, v.Key)
}

// TestRuleTable: testdata/rule.txt, the verdict of the rule for every
// attack on an archived stream and on echostore's own keys, with a write
// and with an admin token (check: one line per command, "write …, admin
// …"), and the refusal's text (reply scope=…).
func TestRuleTable(t *testing.T) {
	datadriven.RunTest(t, "testdata/rule.txt", func(t *testing.T, d *datadriven.TestData) string {
		var out []string
		for _, line := range strings.Split(d.Input, "\n") {
			args := words(t, line)
			switch d.Cmd {
			case "check":
				out = append(out, line+" → write "+verdict(t, args, ScopeWrite)+", admin "+verdict(t, args, ScopeAdmin))
			case "reply":
				sc := map[string]Scope{"write": ScopeWrite, "admin": ScopeAdmin}[argString(t, d, "scope")]
				v, err := Check(context.Background(), args, sc, tableKeys())
				if err != nil {
					out = append(out, "error: "+err.Error())
				} else if v.Allowed {
					out = append(out, "allowed")
				} else {
					out = append(out, v.Reply())
				}
			default:
				t.Fatalf("%s: unknown directive %s", d.Pos, d.Cmd)
			}
		}
		return strings.Join(out, "\n")
	})
}

// TestRuleAsks: a plain XADD and the read commands ask Keys nothing (the
// front's hot path), a write names each argument once, and a lookup that
// fails is an error (the caller refuses the command).
func TestRuleAsks(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cmd   string
		asked int
	}{
		{"XADD orders * f v", 0},
		{"XADD orders * MAXLEN 0", 0},
		{"XRANGE orders - +", 0},
		{"XREADGROUP GROUP g c STREAMS orders >", 0},
		{"SET a a", 1},
		{"SET a b", 2},
		{"XTRIM orders MINID 5", 2},
		{"XTRIM plain MAXLEN 0", 1},
	} {
		k := tableKeys()
		if _, err := Check(ctx, words(t, c.cmd), ScopeWrite, k); err != nil {
			t.Fatal(err)
		}
		if k.asked != c.asked {
			t.Errorf("%s asked Keys %d times, want %d", c.cmd, k.asked, c.asked)
		}
	}
	for _, cmd := range []string{"DEL lookup-fails", "XTRIM lookup-fails MINID 0", "XADD lookup-fails MAXLEN 1 * f v"} {
		if _, err := Check(ctx, words(t, cmd), ScopeAdmin, tableKeys()); !errors.Is(err, errLookup) {
			t.Errorf("%s with a failing lookup: %v, want errLookup", cmd, err)
		}
	}
	if v, err := Check(ctx, words(t, "DEL orders"), ScopeAdmin, nil); err != nil || !v.Allowed {
		t.Errorf("DEL orders without Keys: %+v, %v (no key is archived then)", v, err)
	}
	if v, err := Check(ctx, words(t, "DEL emq:{shop}:jobs"), ScopeAdmin, nil); err != nil || v.Allowed {
		t.Errorf("DEL of an own key without Keys: %+v, %v, want refused", v, err)
	}
}

// argString reads the value of a directive's argument key, failing
// the test when it is missing or malformed.
func argString(t *testing.T, d *datadriven.TestData, key string) string {
	var s string
	d.ScanArgs(t, key, &s)
	return s
}
