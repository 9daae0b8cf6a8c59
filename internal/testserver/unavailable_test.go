package testserver

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestChildNeedsMinIO is run only as a child of TestMissingBinary, in an
// environment where no minio binary can be found.
func TestChildNeedsMinIO(t *testing.T) {
	if os.Getenv("ECHOSTORE_TESTSERVER_CHILD") != "1" {
		t.Skip("run only as a child of TestMissingBinary")
	}
	var p Pool
	p.MinIO(t)
	t.Log("got a MinIO where none should exist")
}

// A missing server binary fails a test under CI=true and skips it otherwise.
func TestMissingBinary(t *testing.T) {
	for _, c := range []struct {
		ci   string
		want string
	}{{"true", "--- FAIL: TestChildNeedsMinIO"}, {"", "--- SKIP: TestChildNeedsMinIO"}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildNeedsMinIO$", "-test.v")
		cmd.Env = []string{
			"ECHOSTORE_TESTSERVER_CHILD=1",
			"CI=" + c.ci,
			"PATH=" + t.TempDir(), // no minio on PATH
			"XDG_CACHE_HOME=" + t.TempDir(),
			"HOME=" + t.TempDir(),
		}
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Fatalf("CI=%q: want %q in the child's output:\n%s", c.ci, c.want, out)
		}
		if !strings.Contains(string(out), "server binary not found") {
			t.Fatalf("CI=%q: the message does not say what is missing:\n%s", c.ci, out)
		}
	}
}
