// Package crashtest runs a test's body in a child process that the test
// kills with SIGKILL at a point it chooses, so that the test can check what
// survives a real crash.
//
// The test binary re-executes itself with -test.run=^Name$ and an
// environment variable naming the child's role. The child reports progress
// with Report (one line on stdout, e.g. an LSN it has committed); the parent
// reads those lines with Next, synchronising on them, and then kills the
// child with Kill. No sleeps: the parent knows exactly which reports the
// child made before it died.
//
//	func TestCrash(t *testing.T) {
//		if arg, ok := crashtest.Child("TestCrash"); ok {
//			runChild(arg) // commits, crashtest.Report(lsn) after each
//			return
//		}
//		p := crashtest.Start(t, "TestCrash", dir)
//		line, err := p.Next()
//		…
//		p.Kill()
//		// reopen dir and check
//	}
package crashtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const (
	envChild = "ECHOSTORE_CRASHTEST_CHILD" // the test name the child runs
	envArg   = "ECHOSTORE_CRASHTEST_ARG"   // the argument passed to it
	prefix   = "crashtest: "               // marks report lines on stdout
)

// Child reports whether this process is the child started for test name,
// and returns the argument the parent passed.
func Child(name string) (arg string, ok bool) {
	if os.Getenv(envChild) != name {
		return "", false
	}
	return os.Getenv(envArg), true
}

// Report prints one report line for the parent (unbuffered, so the parent
// sees it as soon as Report returns). The line must not contain a newline.
func Report(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if strings.ContainsRune(line, '\n') {
		panic("crashtest: report contains a newline")
	}
	_, _ = os.Stdout.WriteString(prefix + line + "\n")
}

// Process is a running child.
type Process struct {
	name   string
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr *lockedBuffer
	exited bool
	rest   []string // reports still in the pipe when the child was killed
}

// Start runs the current test binary as a child that runs only test name,
// with arg available to it through Child. The child is killed when the test
// ends, if it is still running.
func Start(t testing.TB, name, arg string) *Process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), envChild+"="+name, envArg+"="+arg)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("crashtest: %v", err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("crashtest: start child %s: %v", name, err)
	}
	p := &Process{name: name, cmd: cmd, lines: bufio.NewScanner(out), stderr: stderr}
	p.lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// Next returns the child's next report. If the child's output ends first
// (it exited or crashed on its own), the error says so and carries what the
// child wrote to stderr.
func (p *Process) Next() (string, error) {
	for p.lines.Scan() {
		if line, ok := strings.CutPrefix(p.lines.Text(), prefix); ok {
			return line, nil
		}
	}
	err := p.lines.Err()
	if err == nil {
		err = io.EOF
	}
	werr := p.wait()
	return "", fmt.Errorf("crashtest: child %s ended before reporting (%v, exit: %v); its stderr:\n%s",
		p.name, err, werr, p.stderr.String())
}

// Stderr returns what the child has written to stderr so far.
func (p *Process) Stderr() string { return p.stderr.String() }

// Kill sends SIGKILL to the child and waits for it to be gone. Reports the
// child made before it died but the parent had not read yet are kept: Rest
// returns them. Killing a child that has exited is a no-op.
func (p *Process) Kill() error {
	if p.exited {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("crashtest: kill child %s: %w", p.name, err)
	}
	// The child is dead: its stdout ends once the pipe is drained.
	for p.lines.Scan() {
		if line, ok := strings.CutPrefix(p.lines.Text(), prefix); ok {
			p.rest = append(p.rest, line)
		}
	}
	_ = p.wait()
	return nil
}

// Rest returns the reports that were still unread when Kill ended the child,
// in order: together with the lines Next returned, every report the child
// made before it died.
func (p *Process) Rest() []string { return p.rest }

func (p *Process) wait() error {
	if p.exited {
		return nil
	}
	p.exited = true
	return p.cmd.Wait() // closes our end of the stdout pipe; unread reports are dropped

}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep the first MiB
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
