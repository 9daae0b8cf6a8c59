package champ

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScripts drives a Map[uint64, string] with the scripts in
// testdata/script (github.com/cockroachdb/datadriven's format, as in Pebble;
// `go test -run TestScripts -rewrite` rewrites the expectations). Commands:
//
//	new [hasher=uint64|collide3|chains|low10]  a fresh empty map (uint64 by default)
//	set k=K v=V                                 Set; prints the new Len
//	delete k=K                                  Delete; prints the new Len
//	get k=K [snap=S]                            the value, or "not found"
//	iter [snap=S]                               every entry "K=V", in key order
//	snapshot name=S                             keep the current map as S
//	transient                                   apply the input's lines ("set K V",
//	                                            "delete K") to a Transient, then
//	                                            Persistent; prints the new Len
//	check [snap=S]                              the node invariants hold and the
//	                                            map equals its model; prints "ok"
//
// Each map is checked against a plain Go map kept beside it, so a script
// shows the behaviour and the invariants are verified at every check.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/script", func(t *testing.T, path string) {
		var st scriptState
		datadriven.RunTest(t, path, st.run)
	})
}

type scriptMap struct {
	m     Map[uint64, string]
	model map[uint64]string
}

// scriptState is one script's: the current map and the named snapshots.
type scriptState struct {
	cur   *scriptMap
	snaps map[string]*scriptMap
}

func (st *scriptState) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "new" && st.cur == nil {
		t.Fatalf("%s: %s before new", d.Pos, d.Cmd)
	}
	pick := func() *scriptMap {
		if !d.HasArg("snap") {
			return st.cur
		}
		name := argString(t, d, "snap")
		s, ok := st.snaps[name]
		if !ok {
			t.Fatalf("%s: no snapshot %q", d.Pos, name)
		}
		return s
	}
	switch d.Cmd {
	case "new":
		name := "uint64"
		if d.HasArg("hasher") {
			name = argString(t, d, "hasher")
		}
		h, ok := testHashers[name]
		if !ok {
			t.Fatalf("%s: no hasher %q", d.Pos, name)
		}
		st.cur = &scriptMap{m: New[uint64, string](h), model: map[uint64]string{}}
		st.snaps = map[string]*scriptMap{}
		return "ok"
	case "set":
		k, v := argUint(t, d, "k"), argString(t, d, "v")
		st.cur = &scriptMap{m: st.cur.m.Set(k, v), model: with(st.cur.model, k, v)}
		return fmt.Sprintf("len=%d", st.cur.m.Len())
	case "delete":
		k := argUint(t, d, "k")
		st.cur = &scriptMap{m: st.cur.m.Delete(k), model: without(st.cur.model, k)}
		return fmt.Sprintf("len=%d", st.cur.m.Len())
	case "get":
		v, ok := pick().m.Get(argUint(t, d, "k"))
		if !ok {
			return "not found"
		}
		return v
	case "iter":
		m := pick().m
		got := map[uint64]string{}
		for k, v := range m.All() {
			if _, dup := got[k]; dup {
				return fmt.Sprintf("key %d yielded twice", k)
			}
			got[k] = v
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(got)) {
			fmt.Fprintf(&b, "%d=%s\n", k, got[k])
		}
		if b.Len() == 0 {
			return "empty"
		}
		return b.String()
	case "snapshot":
		st.snaps[argString(t, d, "name")] = st.cur
		return "ok"
	case "transient":
		tr := st.cur.m.Transient()
		model := maps.Clone(st.cur.model)
		for _, line := range strings.Split(d.Input, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			var k uint64
			var err error
			if len(f) > 1 {
				k, err = strconv.ParseUint(f[1], 0, 64)
			}
			switch {
			case err != nil:
				t.Fatalf("%s: transient line %q: %v", d.Pos, line, err)
			case f[0] == "set" && len(f) == 3:
				tr.Set(k, f[2])
				model[k] = f[2]
			case f[0] == "delete" && len(f) == 2:
				tr.Delete(k)
				delete(model, k)
			default:
				t.Fatalf("%s: transient line %q: want \"set K V\" or \"delete K\"", d.Pos, line)
			}
		}
		st.cur = &scriptMap{m: tr.Persistent(), model: model}
		return fmt.Sprintf("len=%d", st.cur.m.Len())
	case "check":
		s := pick()
		check(t, s.m, s.model)
		return "ok"
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

func with(m map[uint64]string, k uint64, v string) map[uint64]string {
	m = maps.Clone(m)
	m[k] = v
	return m
}

func without(m map[uint64]string, k uint64) map[uint64]string {
	m = maps.Clone(m)
	delete(m, k)
	return m
}

// argString and argUint read the value of a directive's argument key (a
// number in any of Go's bases), failing the test when it is missing or
// malformed.
func argString(t *testing.T, d *datadriven.TestData, key string) string {
	var s string
	d.ScanArgs(t, key, &s)
	return s
}

func argUint(t *testing.T, d *datadriven.TestData, key string) uint64 {
	n, err := strconv.ParseUint(argString(t, d, key), 0, 64) // 0x… and 0b… too
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return n
}
