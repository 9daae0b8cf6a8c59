package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal: the terminal the
// command writes to, and the end the test reads it from.
func openPTY(t *testing.T) (tty, ctrl *os.File) {
	t.Helper()
	ctrl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { ctrl.Close() })
	fd := int(ctrl.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty, ctrl
}

// TestReplayProgress: with stdout a terminal the replay shows its progress
// on stderr (the records copied); with stdout a file or a pipe it shows
// none, and the summary line is the same.
func TestReplayProgress(t *testing.T) {
	_, g, _ := replaySetup(t, 40)
	tty, ctrl := openPTY(t)
	var stderr bytes.Buffer
	args := append(append([]string{}, g...), "stream", "replay", "q", "orders", "--into", "on-a-terminal", "--rate", "100")
	if code := execute(context.Background(), args, tty, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	tty.Close()
	out, _ := io.ReadAll(ctrl) // ends with EIO once the terminal is closed
	if !strings.Contains(stderr.String(), "replay") || !strings.Contains(stderr.String(), "replay (40/") ||
		!strings.Contains(string(out), `"copied":40,`) {
		t.Fatalf("on a terminal: stderr %q, stdout %q", stderr.String(), out)
	}
	var stdout bytes.Buffer
	stderr.Reset()
	args[len(args)-3] = "in-a-file"
	if code := execute(context.Background(), args, &stdout, &stderr); code != 0 || stderr.Len() != 0 || !strings.Contains(stdout.String(), `"copied":40,`) {
		t.Fatalf("not a terminal: exit %d, stderr %q, stdout %q", code, stderr.String(), stdout.String())
	}
}
