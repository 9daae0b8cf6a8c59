package guidetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/echostore/echostore/internal/testserver"
)

// guidePath is the guide this package runs.
const guidePath = "../../docs/BRING-YOUR-OWN-STREAMS.md"

// needKeyReplay is the condition of the steps that need key streams in
// stream replay and in the RESP front.
const needKeyReplay = "key-replay"

// block is one marked fenced block of the guide.
type block struct {
	line  int    // line of the opening fence
	kind  string // "file" or "run"
	name  string // file: the file's name
	needs string // run: a condition, or ""
	body  []string
}

// step is one "$ command" of a run block and the output the guide shows.
type step struct {
	line   int
	cmd    string
	want   []string
	status int
}

var markRE = regexp.MustCompile(`^<!-- guide: (file|run)(?: ([^ ]+))? -->$`)

// parseGuide returns the marked blocks of the guide's text.
func parseGuide(text string) ([]block, error) {
	lines := strings.Split(text, "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		m := markRE.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			if strings.Contains(lines[i], "<!-- guide:") {
				return nil, fmt.Errorf("line %d: malformed guide mark %q", i+1, lines[i])
			}
			continue
		}
		b := block{kind: m[1]}
		switch {
		case b.kind == "file" && m[2] != "":
			b.name = m[2]
		case b.kind == "run" && m[2] == "":
		case b.kind == "run" && strings.HasPrefix(m[2], "needs="):
			b.needs = strings.TrimPrefix(m[2], "needs=")
		default:
			return nil, fmt.Errorf("line %d: malformed guide mark %q", i+1, lines[i])
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j >= len(lines) || !strings.HasPrefix(lines[j], "```") {
			return nil, fmt.Errorf("line %d: a guide mark not followed by a fenced block", i+1)
		}
		if b.kind == "run" && strings.TrimSpace(lines[j]) != "```sh" {
			return nil, fmt.Errorf("line %d: a run block must be ```sh", j+1)
		}
		b.line = j + 1
		k := j + 1
		for k < len(lines) && strings.TrimSpace(lines[k]) != "```" {
			b.body = append(b.body, lines[k])
			k++
		}
		if k >= len(lines) {
			return nil, fmt.Errorf("line %d: fenced block not closed", j+1)
		}
		out = append(out, b)
		i = k
	}
	return out, nil
}

var exitRE = regexp.MustCompile(`^\[exit (\d+)\]$`)

// steps splits a run block into its commands.
func (b block) steps() ([]step, error) {
	var out []step
	for i, l := range b.body {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			out = append(out, step{line: b.line + 1 + i, cmd: c})
			continue
		}
		if len(out) == 0 {
			if strings.TrimSpace(l) == "" {
				continue
			}
			return nil, fmt.Errorf("line %d: output before the block's first command", b.line+1+i)
		}
		out[len(out)-1].want = append(out[len(out)-1].want, l)
	}
	for i := range out {
		w := trimLines(out[i].want)
		if n := len(w); n > 0 {
			if m := exitRE.FindStringSubmatch(w[n-1]); m != nil {
				out[i].status, _ = strconv.Atoi(m[1])
				w = w[:n-1]
			}
		}
		out[i].want = w
	}
	return out, nil
}

// trimLines drops trailing spaces of each line and blank lines at the end.
func trimLines(ls []string) []string {
	var out []string
	for _, l := range ls {
		out = append(out, strings.TrimRight(l, " \t\r"))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// lineMatches reports whether got matches the expected line want, where
// "…" in want stands for any run of characters.
func lineMatches(want, got string) bool {
	parts := strings.Split(want, "…")
	if len(parts) == 1 {
		return want == got
	}
	var re strings.Builder
	re.WriteString("^")
	for i, p := range parts {
		if i > 0 {
			re.WriteString(".*")
		}
		re.WriteString(regexp.QuoteMeta(p))
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(got)
}

// outputMatches reports whether the lines got match want, where a want
// line of only "…" stands for any number of lines.
func outputMatches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "…" {
		for k := 0; k <= len(got); k++ {
			if outputMatches(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && lineMatches(want[0], got[0]) && outputMatches(want[1:], got[1:])
}

func TestMatching(t *testing.T) {
	cases := []struct {
		want, got []string
		ok        bool
	}{
		{[]string{"a"}, []string{"a"}, true},
		{[]string{"a"}, []string{"b"}, false},
		{[]string{"a"}, []string{"a", "b"}, false},
		{[]string{`{"id":"…","n":1}`}, []string{`{"id":"17-0","n":1}`}, true},
		{[]string{`{"id":"…","n":1}`}, []string{`{"id":"17-0","n":2}`}, false},
		{[]string{"x", "…", "z"}, []string{"x", "z"}, true},
		{[]string{"x", "…", "z"}, []string{"x", "y", "y", "z"}, true},
		{[]string{"x", "…", "z"}, []string{"x", "y"}, false},
		{[]string{"a.b"}, []string{"axb"}, false},
	}
	for _, c := range cases {
		if got := outputMatches(c.want, c.got); got != c.ok {
			t.Errorf("outputMatches(%q, %q) = %v, want %v", c.want, c.got, got, c.ok)
		}
	}
	bs, err := parseGuide("<!-- guide: run -->\n```sh\n$ echo hi\nhi\n$ false\n[exit 1]\n```\n")
	if err != nil || len(bs) != 1 {
		t.Fatalf("parseGuide: %v %v", bs, err)
	}
	st, err := bs[0].steps()
	if err != nil || len(st) != 2 || st[0].cmd != "echo hi" || len(st[0].want) != 1 || st[1].status != 1 || len(st[1].want) != 0 {
		t.Fatalf("steps: %+v %v", st, err)
	}
	if _, err := parseGuide("<!-- guide: run -->\ntext\n"); err == nil {
		t.Fatal("a mark without a block parsed")
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestGuide runs the guide's steps in order and fails on the first one whose
// exit status or output differs from what the guide shows.
func TestGuide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	text, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatalf("read the guide: %v", err)
	}
	blocks, err := parseGuide(string(text))
	if err != nil {
		t.Fatalf("%s: %v", guidePath, err)
	}
	py, err := testserver.PythonRedis(ctx)
	if err != nil {
		testserver.Unavailable(t, err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		testserver.Unavailable(t, fmt.Errorf("redis-cli: %w", testserver.ErrMissing))
	}
	r, err := testserver.StartRedis(ctx, testserver.RedisConfig{})
	if err != nil {
		testserver.Unavailable(t, err)
	}
	t.Cleanup(func() { r.Stop() })

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	work := filepath.Join(tmp, "work")
	for _, d := range []string{bin, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if prebuilt := os.Getenv("GUIDE_ECHOSTORE"); prebuilt != "" {
		if err := os.Symlink(prebuilt, filepath.Join(bin, "echostore")); err != nil {
			t.Fatal(err)
		}
		t.Logf("running the guide with GUIDE_ECHOSTORE=%s", prebuilt)
	} else if out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, "echostore"), "github.com/echostore/echostore/cmd/echostore").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	respPort := freePort(t)
	wrappers := map[string]string{
		"python3": "#!/bin/sh\nexec " + py + " \"$@\"\n",
		"redis-cli": `#!/bin/bash
args=()
port=` + strconv.Itoa(r.Port) + `
while [ $# -gt 0 ]; do
  if [ "$1" = "-p" ] && [ "$2" = "6380" ]; then port=` + strconv.Itoa(respPort) + `; shift 2; continue; fi
  args+=("$1"); shift
done
exec ` + cli + ` -p "$port" "${args[@]}"
`,
	}
	for name, body := range wrappers {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"REDIS_URL="+r.URL,
		"ECHOSTORE_REDIS="+r.URL,
		"ECHOSTORE_LISTEN=127.0.0.1:"+strconv.Itoa(freePort(t)),
		"ECHOSTORE_RESP=127.0.0.1:"+strconv.Itoa(respPort),
		"RESP_URL=redis://127.0.0.1:"+strconv.Itoa(respPort)+"/0",
	)

	help, _ := exec.CommandContext(ctx, filepath.Join(bin, "echostore"), "stream", "replay", "--help").CombinedOutput()
	have := map[string]bool{needKeyReplay: bytes.Contains(help, []byte("--key"))}
	if !have[needKeyReplay] {
		if os.Getenv("CI") == "true" {
			// main's echostore has it: under CI a binary without it is a
			// regression, not a reason to leave steps of the guide out.
			t.Fatalf("this echostore's stream replay has no --key: the guide's steps marked needs=%s cannot run", needKeyReplay)
		}
		t.Logf("this echostore's stream replay has no --key: the guide's steps marked needs=%s are not run", needKeyReplay)
	}

	// Every command runs in its own process group, which is killed at the
	// end (a command may leave a process behind it, as serve with &).
	var groups []int
	t.Cleanup(func() {
		for _, g := range groups {
			syscall.Kill(-g, syscall.SIGTERM)
		}
		// Wait (bounded) until they are gone, so that the temporary
		// directory is no longer written to when it is removed.
		deadline := time.Now().Add(15 * time.Second)
		for _, g := range groups {
			for syscall.Kill(-g, 0) == nil {
				if time.Now().After(deadline) {
					syscall.Kill(-g, syscall.SIGKILL)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
	ran := 0
	for _, b := range blocks {
		if b.kind == "file" {
			body := strings.Join(b.body, "\n") + "\n"
			if err := os.WriteFile(filepath.Join(work, b.name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if b.needs != "" {
			ok, known := have[b.needs]
			if !known {
				t.Fatalf("%s:%d: unknown condition needs=%s", guidePath, b.line, b.needs)
			}
			if !ok {
				t.Logf("%s:%d: not run (needs=%s)", guidePath, b.line, b.needs)
				continue
			}
		}
		steps, err := b.steps()
		if err != nil {
			t.Fatalf("%s: %v", guidePath, err)
		}
		for _, s := range steps {
			sctx, scancel := context.WithTimeout(ctx, 45*time.Second)
			cmd := exec.CommandContext(sctx, "bash", "-c", s.cmd)
			cmd.Dir = work
			cmd.Env = env
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 5 * time.Second
			var out bytes.Buffer
			cmd.Stdout = &out
			cmd.Stderr = &out
			err := cmd.Start()
			if err == nil {
				groups = append(groups, cmd.Process.Pid)
				err = cmd.Wait()
			}
			scancel()
			status := 0
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				status = ee.ExitCode()
			case err != nil:
				t.Fatalf("%s:%d: $ %s: %v\n%s", guidePath, s.line, s.cmd, err, out.Bytes())
			}
			got := trimLines(splitLines(out.String()))
			if status != s.status || !outputMatches(s.want, got) {
				logs, _ := filepath.Glob(filepath.Join(work, "*.log"))
				for _, l := range logs {
					b, _ := os.ReadFile(l)
					t.Logf("%s:\n%s", filepath.Base(l), b)
				}
				t.Fatalf("%s:%d: $ %s\nexit status %d (the guide shows %d); output:\n%s\nthe guide shows:\n%s",
					guidePath, s.line, s.cmd, status, s.status, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
			}
			ran++
		}
	}
	if ran == 0 {
		t.Fatalf("%s: no step ran", guidePath)
	}
	t.Logf("%d steps of the guide ran as shown", ran)
}

// splitLines splits s into lines.
func splitLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
