package testserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ErrMissing is wrapped when a server binary cannot be found.
var ErrMissing = errors.New("server binary not found")

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portFree reports whether port can be bound on loopback now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// proc is a server child process with its log file.
type proc struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

func startProc(bin string, args []string, dir, logName string, env []string) (*proc, error) {
	return startProcAs(bin, args, dir, logName, env, nil)
}

// startProcAs is startProc with the child running as cred's user (nil: as
// this process's).
func startProcAs(bin string, args []string, dir, logName string, env []string, cred *syscall.Credential) (*proc, error) {
	logPath := filepath.Join(dir, logName)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), env...)
	// Own process group, and die with the test process where the OS allows.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits for the process to end, killing it after timeout.
func (p *proc) stop(sig syscall.Signal, timeout time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("pid %d did not stop within %s; killed", p.cmd.Process.Pid, timeout)
	}
}

// tail returns the end of the process log, for error messages.
func (p *proc) tail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// waitReady polls ready until it returns nil, the process exits, or ctx ends.
// Polling here is waiting for a child to come up, with a deadline; it is not
// an assertion about time.
func waitReady(ctx context.Context, p *proc, what string, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("%s exited before it was ready: %v\n%s", what, p.waitErr, p.tail())
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %v (last: %v)\n%s", what, ctx.Err(), last, p.tail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
