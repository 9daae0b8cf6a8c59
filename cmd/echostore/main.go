// Command echostore keeps Redis streams bounded in memory without
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
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/redact"
	"github.com/echostore/echostore/server"
	"github.com/echostore/echostore/xid"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the command line args and returns its exit status: 0, or
// exitCode's. The error is printed to
// stderr with every secret of --redis and --remote hidden, whatever the
// layer that wrote it.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var secrets []string
	for _, name := range []string{"redis", "remote"} {
		if f := root.PersistentFlags().Lookup(name); f != nil {
			secrets = append(secrets, redact.Secrets(f.Value.String())...)
		}
	}
	for _, env := range []string{"ECHOSTORE_REDIS", "ECHOSTORE_REMOTE"} {
		secrets = append(secrets, redact.Secrets(os.Getenv(env))...)
	}
	if k := strings.TrimSpace(os.Getenv("ECHOSTORE_REMOTE_KEY")); k != "" {
		secrets = append(secrets, k) // never shown; hidden all the same
	}
	// The layers' own "echostore: " prefix is not repeated.
	msg := strings.TrimPrefix(redact.Scrub(err.Error(), secrets...), "echostore: ")
	fmt.Fprintf(stderr, "echostore: %s\n", msg)
	return exitCode(err)
}

// Exit statuses: 1 for a command that failed, 2 for a command line that is
// wrong (a bad flag value, a missing flag, a bad --redis or --remote URL:
// nothing was done).
const (
	exitFailure = 1
	exitUsage   = 2
)

// exitCode is the exit status of a command that returned err (non-nil).
func exitCode(err error) int {
	var ee exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, remote.ErrBadURL), errors.Is(err, remote.ErrUnknownScheme),
		errors.Is(err, mq.ErrBadURL), errors.Is(err, server.ErrMemRemote), errors.Is(err, echostore.ErrMemRemote),
		errors.Is(err, names.ErrInvalid), errors.Is(err, brand.ErrMalformed), errors.Is(err, xid.ErrSyntax),
		errors.Is(err, server.ErrConfig), errors.Is(err, server.ErrInsecure), errors.Is(err, sealed.ErrBadKey),
		errors.Is(err, echostore.ErrNotEmpty), errors.Is(err, echostore.ErrRestoreRemote),
		errors.Is(err, echostore.ErrRestorePending):
		// A name or an id of the command line that does not parse; a bad
		// remote key; a restore refused (nothing was created).
		return exitUsage
	case strings.HasPrefix(err.Error(), "unknown command "),
		strings.HasPrefix(err.Error(), "required flag(s) "),
		strings.HasPrefix(err.Error(), "if any flags in the group "):
		// cobra's, for a subcommand that does not exist, a required flag
		// not given and flags that exclude each other (cobra has no
		// error types for them).
		return exitUsage
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
