package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// Defaults of the global flags (DESIGN.md, "The user's contract").
const (
	defaultRedis = "redis://127.0.0.1:6379/0"
	defaultData  = "./echostore-data"
)

// globals are the flags every subcommand shares. Each has an environment
// variable; a flag given on the command line wins over it.
type globals struct {
	redis  string // --redis, ECHOSTORE_REDIS
	data   string // --data, ECHOSTORE_DATA
	remote string // --remote, ECHOSTORE_REMOTE; default file://<data>/remote
	// tokenFile (--token-file, ECHOSTORE_TOKEN_FILE) holds the bearer
	// token: serve's admin token, the one the other commands send to it.
	tokenFile string

	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// remoteURL returns the remote to use: the flag, or file://<data>/remote.
func (g *globals) remoteURL() string {
	if g.remote != "" {
		return g.remote
	}
	abs, err := filepath.Abs(g.data)
	if err != nil {
		abs = g.data
	}
	return "file://" + filepath.ToSlash(filepath.Join(abs, "remote"))
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
		Long: `echostore keeps Redis/Valkey streams bounded in memory without losing a record.
What retention trims is first folded into a versioned page store (Graft) that
replicates to object storage; one merge-read returns archive and live tail as a
single ordered stream.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitError{exitUsage, err} })
	pf := root.PersistentFlags()
	pf.StringVar(&g.redis, "redis", envOr("ECHOSTORE_REDIS", defaultRedis),
		"Redis/Valkey URL (redis:// or rediss://) [$ECHOSTORE_REDIS]")
	pf.StringVar(&g.data, "data", envOr("ECHOSTORE_DATA", defaultData),
		"data directory [$ECHOSTORE_DATA]")
	pf.StringVar(&g.remote, "remote", envOr("ECHOSTORE_REMOTE", ""),
		"object-store URL: file://DIR or s3://BUCKET?endpoint=… (default file://<data>/remote) [$ECHOSTORE_REMOTE]")
	pf.StringVar(&g.tokenFile, "token-file", envOr("ECHOSTORE_TOKEN_FILE", ""),
		"file holding the bearer token (serve: an admin token; other commands: sent to the serve holding --data); else $ECHOSTORE_TOKEN [$ECHOSTORE_TOKEN_FILE]")

	root.AddCommand(
		newIDCmd(g),
		newBenchCmd(g),
		newStreamCmd(g),
		newQueueCmd(g),
		newEnqueueCmd(g),
		newArchiveCmd(g),
		newVolumeCmd(g),
		newServeCmd(g),
	)
	return root
}
