package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestExitCodes: a command line that is wrong (argument count, unknown
// command, a flag value, a name or an id that does not parse, flags that
// exclude each other) exits 2 before anything is contacted; a command that
// fails at what it does exits 1. Redis here is a port nobody listens on:
// a usage error must come before any attempt to reach it.
func TestExitCodes(t *testing.T) {
	data := t.TempDir()
	for _, tc := range []struct {
		args string
		code int
	}{
		{"stream append", 2},
		{"stream append q", 2},
		{"nosuch", 2},
		{"stream read q bad!name", 2},
		{"stream read q s --from nonsense", 2},
		{"stream read q s --live-only --archive-only", 2},
		{"volume info bad/name", 2},
		{"queue claim q --count 0", 2},
		{"queue claim q --stalled -1s", 2},
		{"queue dead q --limit 0", 2},
		{"enqueue q --mode later {}", 2},
		{"archive cycle q s", 2},
		{"archive cycle q s --keep -1", 2},
		{"stream read q s --bogus-flag", 2},
		{"queue status q", 1},        // Redis unreachable: the command failed
		{"stream append q s a=1", 1}, // likewise
		{"stream read q s --live-only", 1},
	} {
		t.Run(tc.args, func(t *testing.T) {
			var out bytes.Buffer
			args := append(strings.Fields(tc.args), "--data", data, "--redis", "redis://127.0.0.1:1")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if code := execute(ctx, args, &out, &out); code != tc.code {
				t.Fatalf("echostore %s: exit %d, want %d\n%s", tc.args, code, tc.code, out.String())
			}
		})
	}
}
