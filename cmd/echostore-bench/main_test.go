package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
)

// planted is the secret the tests below put into --redis and --s3; it must
// appear in no output.
const planted = "PLANTEDx9q"

// TestCommandLineRedacted: the command line a bench report records hides
// the secrets of its URLs.
func TestCommandLineRedacted(t *testing.T) {
	root := newRootCmd(&bytes.Buffer{}, &bytes.Buffer{})
	cmd, _, err := root.Find([]string{"all"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags([]string{"--redis", "redis://:" + planted + "@h:1/0", "--s3", "s3://b?endpoint=http://h&token=" + planted}); err != nil {
		t.Fatal(err)
	}
	if got := commandLine(cmd); strings.Contains(got, "PLANTED") {
		t.Errorf("commandLine = %q", got)
	}
}

// TestErrorsRedacted: a failed run prints its error with the secrets of
// --redis and --s3 hidden, and a wrong command line exits 2.
func TestErrorsRedacted(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), []string{"--redis", "redis://:" + planted + "@h:1/0",
		"all", "--s3", "s3://b?endpoint=http://h&token=" + planted, "--dir", "/nonexistent/" + planted}, &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "--dir") || strings.Contains(stderr.String()+stdout.String(), planted) {
		t.Errorf("exit %d, stderr %q; want exit %d naming --dir, without the secret", code, stderr.String(), exitFailure)
	}
	stderr.Reset()
	if code := execute(context.Background(), []string{"graft", "--no-such-flag"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("unknown flag: exit %d (%q), want %d", code, stderr.String(), exitUsage)
	}
}

// TestEchostoreLinksNoBench: the echostore binary links none of what the
// suites need (plotting, the private server launcher, the suites, the
// peers asynq and River with its Postgres driver), which is why they are a
// binary of their own.
func TestEchostoreLinksNoBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/echostore/echostore/cmd/echostore").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, bad := range []string{"gonum.org/", "github.com/chromedp/", "github.com/echostore/echostore/internal/testserver",
			"github.com/echostore/echostore/internal/bench", "github.com/echostore/echostore/cmd/echostore-bench/", "github.com/hibiken/asynq", "github.com/riverqueue/", "github.com/jackc/"} {
			if strings.HasPrefix(p, bad) {
				t.Errorf("cmd/echostore links %s", p)
			}
		}
	}
}

// TestDefaultBuildLinksNoPeers: the peers the benchmarks measure (asynq, and
// River with pgx) are behind the peers build tag: no package of the module
// links them in the default build, and make passes -tags peers where they
// are measured and tested.
func TestDefaultBuildLinksNoPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/echostore/echostore/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/hibiken/asynq", "github.com/riverqueue/", "github.com/jackc/"} {
			if strings.HasPrefix(p, bad) {
				t.Errorf("the default build links %s", p)
			}
		}
	}
	if !strings.Contains(string(out), "github.com/echostore/echostore/cmd/echostore-bench/internal/all") {
		t.Fatalf("go list did not list the benchmark suites:\n%s", out)
	}
}
