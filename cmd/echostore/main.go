// Command echostore keeps Redis/Valkey streams bounded in memory without
// losing a record: what retention trims is first folded into a durable,
// versioned page store replicated to object storage, and one merge-read
// returns the archive and the live tail as a single ordered stream.
//
// Each subcommand lives in its own file; root.go holds the global flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "echostore: %v\n", err)
		os.Exit(exitCode(err))
	}
}

// Exit statuses: 1 for a command that failed, 2 for a command line that is
// wrong (a bad flag value, a missing flag: nothing was done).
const (
	exitFailure = 1
	exitUsage   = 2
)

// exitCode is the exit status of a command that returned err (non-nil).
func exitCode(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// usageError is an error of the command line itself: exit status 2.
func usageError(format string, a ...any) error {
	return exitError{exitUsage, fmt.Errorf(format, a...)}
}

// exitError carries a specific exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }
