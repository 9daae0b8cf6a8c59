package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/client"
	"github.com/echostore/echostore/graft/remote/sealed"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/redact"
)

// Defaults of the global flags (docs/rfc/0006-user-contract.md).
const (
	defaultRedis = "redis://127.0.0.1:6379/0"
	defaultData  = "./echostore-data"
)

// globals are the flags every subcommand shares. Each has an environment
// variable; a flag given on the command line wins over it.
type globals struct {
	redis  string // --redis, ECHOSTORE_REDIS (with the --redis-password-file password)
	data   string // --data, ECHOSTORE_DATA
	remote string // --remote, ECHOSTORE_REMOTE; default file://<data>/remote
	// remoteKeyFile (--remote-key-file, ECHOSTORE_REMOTE_KEY_FILE) holds
	// the key that encrypts the remote's objects; ECHOSTORE_REMOTE_KEY may
	// give the key itself instead. remoteOldKeyFiles
	// (--remote-old-key-file, ECHOSTORE_REMOTE_OLD_KEY_FILES, comma
	// separated) hold keys that only read, during a rotation.
	remoteKeyFile     string
	remoteOldKeyFiles []string
	// tokenFile (--token-file, ECHOSTORE_TOKEN_FILE) holds the bearer
	// token: serve's admin token, the one the other commands send to it.
	tokenFile string
	// redisPasswordFile is --redis-password-file, ECHOSTORE_REDIS_PASSWORD_FILE:
	// the Redis password, kept out of the command line and the environment.
	redisPasswordFile string
	// history (--history, ECHOSTORE_HISTORY) is how long the archive
	// volumes keep their past states for as-of reads
	// (echostore.Config.History): serve's history:, for the commands that
	// open the data dir themselves.
	history  string
	historyD time.Duration
	// jobOutcomes (--job-outcomes, ECHOSTORE_JOB_OUTCOMES) names each
	// queue's outcome stream (echostore.Config.JobOutcomes): serve's
	// job_outcomes:, for the commands that ack and fail jobs on the data
	// dir themselves; jobOutcomesS is it checked.
	jobOutcomes  string
	jobOutcomesS names.Stream

	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// remoteURL returns the remote to use: the flag, or the data dir's default
// (echostore.DefaultRemote, file://<data>/remote).
func (g *globals) remoteURL() string {
	if g.remote != "" {
		return g.remote
	}
	// It fails only without a working directory; the Node's Open then
	// reports the data dir.
	u, _ := echostore.DefaultRemote(g.data)
	return u
}

// remoteShown is remoteURL with its secrets hidden: the only form of it
// that an error, a log line or an output may show.
func (g *globals) remoteShown() string { return redact.URL(g.remoteURL()) }

// resolve fills in the global flags not given on the command line from
// their environment variables (a default shown by --help never holds an
// environment variable's value, which may carry a password), then adds the
// password of --redis-password-file to the Redis URL.
func (g *globals) resolve(cmd *cobra.Command) error {
	for _, f := range []struct {
		flag, env string
		dst       *string
	}{
		{"redis", "ECHOSTORE_REDIS", &g.redis},
		{"data", "ECHOSTORE_DATA", &g.data},
		{"remote", "ECHOSTORE_REMOTE", &g.remote},
		{"remote-key-file", "ECHOSTORE_REMOTE_KEY_FILE", &g.remoteKeyFile},
		{"redis-password-file", "ECHOSTORE_REDIS_PASSWORD_FILE", &g.redisPasswordFile},
		{"history", "ECHOSTORE_HISTORY", &g.history},
		{"job-outcomes", "ECHOSTORE_JOB_OUTCOMES", &g.jobOutcomes},
	} {
		if fl := cmd.Flags().Lookup(f.flag); fl != nil && fl.Changed {
			continue
		}
		if v, ok := os.LookupEnv(f.env); ok && v != "" {
			*f.dst = v
		}
	}
	if g.history != "" {
		d, err := time.ParseDuration(g.history)
		if err != nil || d < 0 {
			return usageError("--history %q: want a duration such as 24h (0: none)", g.history)
		}
		g.historyD = d
	}
	if g.jobOutcomes != "" {
		st, err := names.ParseStream(g.jobOutcomes)
		if err != nil {
			return usageError("--job-outcomes: %w", err)
		}
		g.jobOutcomesS = st
	}
	if fl := cmd.Flags().Lookup("remote-old-key-file"); (fl == nil || !fl.Changed) && os.Getenv("ECHOSTORE_REMOTE_OLD_KEY_FILES") != "" {
		g.remoteOldKeyFiles = strings.Split(os.Getenv("ECHOSTORE_REMOTE_OLD_KEY_FILES"), ",")
	}
	if g.redisPasswordFile == "" {
		return nil
	}
	u, err := withRedisPassword(g.redis, g.redisPasswordFile)
	if err != nil {
		return usageError("%w", err)
	}
	g.redis = u
	return nil
}

// withRedisPassword returns the Redis URL u with the password read from
// file (its first line) in its user information. A URL that holds a
// password already is refused: one of the two would be ignored.
func withRedisPassword(u, file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--redis-password-file: %w", err)
	}
	pass, _, _ := strings.Cut(string(b), "\n")
	pass = strings.TrimSuffix(pass, "\r")
	if pass == "" {
		return "", usageError("--redis-password-file %s: the file's first line is empty", file)
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "", usageError("--redis %s: want redis://host:port or rediss://host:port", redact.URL(u))
	}
	user := ""
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if strings.Contains(rest[:at], ":") {
			return "", usageError("--redis %s holds a password and --redis-password-file gives one: give it in one place only (the file)", redact.URL(u))
		}
		user, rest = rest[:at], rest[at+1:]
	}
	return scheme + "://" + user + ":" + escapeAll(pass) + "@" + rest, nil
}

// escapeAll percent-encodes every byte of s but the unreserved ones, so
// that a password may hold any character ('@', '/', ':', '%' …).
func escapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// envKey returns the key of ECHOSTORE_REMOTE_KEY (the zero Key if it is
// not set); a value that is no key is a usage error that does not show it.
func envKey() (sealed.Key, error) {
	v := os.Getenv("ECHOSTORE_REMOTE_KEY")
	if v == "" {
		return sealed.Key{}, nil
	}
	k, err := sealed.ParseKey([]byte(v))
	if err != nil {
		return sealed.Key{}, usageError("ECHOSTORE_REMOTE_KEY: %w", err)
	}
	return k, nil
}

// keyring returns the keys of the remote (nil: it is not encrypted):
// --remote-key-file, else ECHOSTORE_REMOTE_KEY, with the keys of
// --remote-old-key-file for reading. A bad key is a usage error.
func (g *globals) keyring() (*sealed.Keyring, error) {
	k, err := envKey()
	if err != nil {
		return nil, err
	}
	ring, err := sealed.LoadKeyring(g.remoteKeyFile, k, g.remoteOldKeyFiles)
	if err != nil {
		return nil, usageError("--remote-key-file: %w", err)
	}
	return ring, nil
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{
		stdout: stdout,
		stderr: stderr,
		log:    slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	root := &cobra.Command{
		Use:   "echostore",
		Short: "Bounded Redis streams with a durable, replicated archive",
		Long: `echostore keeps Redis streams bounded in memory without losing a record.
What retention trims is first folded into a versioned page store (Graft) that
replicates to object storage; one merge-read returns archive and live tail as a
single ordered stream.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.resolve(cmd)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitError{exitUsage, err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.redis, "redis", defaultRedis,
		"Redis URL (redis:// or rediss://); keep a password out of it, in --redis-password-file [$ECHOSTORE_REDIS]")
	pf.StringVar(&g.redisPasswordFile, "redis-password-file", "",
		"file whose first line is the Redis password (so that it shows in no process list) [$ECHOSTORE_REDIS_PASSWORD_FILE]")
	pf.StringVar(&g.data, "data", defaultData,
		"data directory [$ECHOSTORE_DATA]")
	pf.StringVar(&g.remote, "remote", "",
		"object-store URL: file://DIR or s3://BUCKET?endpoint=… (default file://<data>/remote; credentials come from the SDK's environment) [$ECHOSTORE_REMOTE]")
	pf.StringVar(&g.remoteKeyFile, "remote-key-file", "",
		"file holding the key that encrypts every object written to the remote: 32 random bytes, or 64 hex digits (openssl rand -hex 32 > FILE; chmod 600); else the key in $ECHOSTORE_REMOTE_KEY [$ECHOSTORE_REMOTE_KEY_FILE]")
	pf.StringArrayVar(&g.remoteOldKeyFiles, "remote-old-key-file", nil,
		"file holding an older key that still reads the objects it sealed (repeatable; during a rotation) [$ECHOSTORE_REMOTE_OLD_KEY_FILES, comma separated]")
	pf.StringVar(&g.history, "history", "",
		"how long the archive volumes keep their past states for stream read --as-of, such as 24h (serve: history:; default none) [$ECHOSTORE_HISTORY]")
	pf.StringVar(&g.jobOutcomes, "job-outcomes", "",
		"the stream of each queue that keeps its jobs' outcomes (done, retry, dead), such as outcomes (serve: job_outcomes:; default none) [$ECHOSTORE_JOB_OUTCOMES]")
	pf.StringVar(&g.tokenFile, "token-file", envOr("ECHOSTORE_TOKEN_FILE", ""),
		"file holding the bearer token (serve: an admin token; other commands: sent to the serve holding --data); else $ECHOSTORE_TOKEN [$ECHOSTORE_TOKEN_FILE]")

	root.AddCommand(
		newIDCmd(g),
		newStreamCmd(g),
		newQueueCmd(g),
		newEnqueueCmd(g),
		newArchiveCmd(g),
		newExportCmd(g),
		newVolumeCmd(g),
		newRemoteCmd(g),
		newServeCmd(g),
		newRestoreCmd(g),
		movedBenchCmd(),
	)
	adviseAll(root)
	usageArgs(root)
	return root
}

// movedBenchCmd is the old `echostore bench`, hidden: it says where the
// benchmarks went.
func movedBenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "bench",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return usageError("the benchmarks moved to their own binary: bin/echostore-bench (all, graft, champ); `make build` builds it")
		},
	}
}

// adviseAll wraps the RunE of cmd and of every command under it, so that an
// answer of serve that refused the command's credentials says what to give.
func adviseAll(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error { return adviseServe(run(c, args)) }
	}
	for _, sub := range cmd.Commands() {
		adviseAll(sub)
	}
}

// adviseServe adds to a 401 or a 403 of serve what to give instead.
func adviseServe(err error) error {
	var ae *client.Error
	switch {
	case !errors.As(err, &ae):
	case ae.Status == http.StatusUnauthorized:
		return fmt.Errorf("%w: give the right token's file with --token-file or ECHOSTORE_TOKEN_FILE, or set ECHOSTORE_TOKEN; run by serve's own user, the command needs none", err)
	}
	// A 403 forbidden already says to use a token with the scope it names
	// (client.Error).
	return err
}

// usageArgs makes a wrong argument count of c and its subcommands an error
// of the command line (exit status 2), as a bad flag is.
func usageArgs(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		// A group of commands (queue, stream, …): a word after it that
		// names none of its subcommands is an unknown command, not a
		// request for its help.
		c.Args = cobra.NoArgs
		c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	}
	if args := c.Args; args != nil {
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return exitError{exitUsage, err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}
