package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitCodes: a command line that is wrong (argument count, unknown
// command, a flag value, a name or an id that does not parse, flags that
// exclude each other) exits 2 before anything is contacted; a command that
// fails at what it does exits 1. Redis here is a port nobody listens on:
// a usage error must come before any attempt to reach it, and before
// anything is created.
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
		{"queue akc q 1-0", 2}, // a subcommand that does not exist
		{"volume pusj x", 2},
		{"stream bogus", 2},
		{"stream append q s", 2},
		{"stream append q s noequals", 2},
		{"stream read q s --limit -1", 2},
		{"stream read q s --from 1796144294818-0 --to 1796144294000-0", 2},
		{"queue redrive q", 2},
		{"queue redrive q --all 1-0", 2},
		{"queue redrive q --all --limit 5000", 2},
		{"queue ack q notanid", 2},
		{"queue dead q --after zz", 2},
		{"queue claim q --count 1001", 2},
		{"queue dead q --limit 5000", 2},
		{"enqueue q", 2}, // --payload is required
		{"enqueue q --payload 1 --delay 1s --run-at 2030-01-01T00:00:00Z", 2},
		{"id mint -n 0", 2},
		{"serve --beat -1s", 2},
		{"queue jobs q --state running", 2},
		{"queue jobs q", 2}, // --state is required
		{"queue jobs q --state ready --limit 0", 2},
		{"queue jobs q --state ready --limit 1001", 2},
		{"queue fail q 1-0", 2}, // --error is required
		{"queue fail q notanid --error x", 2},
		{"queue fail q 1-0 --error x --attempt 0", 2},
		{"queue fail q 1-0 --error x --consumer=", 2},
		{"queue delete-dead q 1-0", 2}, // not confirmed
		{"queue delete-dead q zz --yes-delete-jobs", 2},
		{"queue delete-dead q", 2},
		{"queue list extra", 2},
		{"stream groups q", 2},
		{"stream groups q s --key k", 2},
		{"queue status q", 1},        // Redis unreachable: the command failed
		{"stream append q s a=1", 1}, // likewise
		{"stream read q s --live-only", 1},
		{"queue list", 1},
		{"queue jobs q --state dead", 1},
		{"queue delete-dead q 1-0 --yes-delete-jobs", 1},
		{"stream groups q s", 1},
	} {
		t.Run(tc.args, func(t *testing.T) {
			data := filepath.Join(data, strings.ReplaceAll(tc.args, " ", "_"))
			var out bytes.Buffer
			args := append(strings.Fields(tc.args), "--data", data, "--redis", "redis://127.0.0.1:1")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if code := execute(ctx, args, &out, &out); code != tc.code {
				t.Fatalf("echostore %s: exit %d, want %d\n%s", tc.args, code, tc.code, out.String())
			}
			if _, err := os.Stat(data); tc.code == 2 && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("echostore %s: a usage error created --data (%v)", tc.args, err)
			}
		})
	}
}
