// Command echostore-bench runs echostore's benchmark suites and prints
// their figures: graft (the local page store), champ (the accept tier's
// outbox), resp (the RESP front beside Redis), peers (the job tier beside
// asynq on the same Redis) and all (every suite, written into
// docs/BENCHMARKS.md's generated block, a JSON report and plots). It is a
// binary of its own so that the echostore binary links none of what the
// suites need: the plotting, the launcher of private redis-server and MinIO
// processes, the seed's algorithms, the peers (asynq).
//
// Each suite writes its work into a temporary directory (never a data dir
// in use) and removes it. Figures are medians of repeated runs; where a
// baseline can be measured in the same run (the disk's raw fsync rate, one
// writer) it stands beside the figure with the ratio. Progress shows on a
// terminal only.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/internal/bench"
	"github.com/echostore/echostore/redact"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Defaults of the global flags, those of echostore.
const (
	defaultRedis = "redis://127.0.0.1:6379/0"
	defaultData  = "./echostore-data"
)

// Exit statuses: 1 for a run that failed, 2 for a command line that is
// wrong (nothing was run).
const (
	exitFailure = 1
	exitUsage   = 2
)

// usageError is the error of a wrong command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// execute runs the command line args and returns its exit status. The
// error is printed to stderr with the secrets of --redis and --s3 hidden.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	secrets := redact.Secrets(os.Getenv("ECHOSTORE_REDIS"))
	secrets = append(secrets, redact.Secrets(root.PersistentFlags().Lookup("redis").Value.String())...)
	if c, _, ferr := root.Find(args); ferr == nil {
		if f := c.Flags().Lookup("s3"); f != nil {
			secrets = append(secrets, redact.Secrets(f.Value.String())...)
		}
	}
	fmt.Fprintf(stderr, "echostore-bench: %s\n", redact.Scrub(err.Error(), secrets...))
	if errors.As(err, new(usageError)) {
		return exitUsage
	}
	return exitFailure
}

// globals are the flags every suite shares. Each has an environment
// variable, that of echostore; a flag given on the command line wins over
// it.
type globals struct {
	redis string // --redis, ECHOSTORE_REDIS: the Redis of the all suite
	data  string // --data, ECHOSTORE_DATA: the parent of the champ suite's temporary folder

	stdout io.Writer
	stderr io.Writer
}

// resolve fills in the global flags not given on the command line from
// their environment variables (a default shown by --help never holds an
// environment variable's value, which may carry a password).
func (g *globals) resolve(cmd *cobra.Command) {
	for _, f := range []struct {
		flag, env string
		dst       *string
	}{
		{"redis", "ECHOSTORE_REDIS", &g.redis},
		{"data", "ECHOSTORE_DATA", &g.data},
	} {
		if fl := cmd.Flags().Lookup(f.flag); fl != nil && fl.Changed {
			continue
		}
		if v, ok := os.LookupEnv(f.env); ok && v != "" {
			*f.dst = v
		}
	}
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "echostore-bench",
		Short: "Run echostore's benchmark suites",
		Long: `Run a benchmark suite and print its figures: a table, or JSON with --json.
Figures are medians of repeated runs; where a baseline can be measured in the
same run (the disk's raw fsync rate, one writer) it stands beside the figure
with the ratio. Progress shows on a terminal only.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			g.resolve(cmd)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.redis, "redis", defaultRedis,
		"Redis URL of the all suite (a private redis-server is started if none answers there) [$ECHOSTORE_REDIS]")
	pf.StringVar(&g.data, "data", defaultData,
		"folder under which champ makes (and removes) its temporary folder [$ECHOSTORE_DATA]")
	root.AddCommand(newGraftCmd(g), newChampCmd(g), newAllCmd(g), newRESPCmd(g), newPeersCmd(g), newHTTPCmd(g), newScaleCmd(g), newScaleServeCmd(g))
	return root
}

// printReport runs a suite, ends its progress bar (p may be nil) and prints
// its report as a table, or as JSON.
func (g *globals) printReport(asJSON bool, p *bench.Progress, run func() (*bench.Report, error)) error {
	r, err := run()
	if p != nil {
		p.Done()
	}
	if err != nil {
		return err
	}
	if asJSON {
		return r.WriteJSON(g.stdout)
	}
	return r.WriteTable(g.stdout)
}
