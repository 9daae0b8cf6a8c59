package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/server"
	"github.com/spf13/cobra"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		listen, config, token string
		respAddr              string
		beat                  time.Duration
		dev, restore          bool
		replicateEvery        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve [--listen 127.0.0.1:7070] [--resp 127.0.0.1:6380] [--config FILE] [--token-file FILE] [--beat D]",
		Short: "Run the archive driver and retention on a beat, the HTTP API, the dashboard and /metrics",
		Long: `Serve the data dir: run the archive driver (fold, then trim) and trim-only
retention over the declared streams every --beat, and the HTTP API (/v1/…),
the dashboard (/), Prometheus metrics (/metrics) and /healthz on --listen.

With no --config every stream comes into being on first use (an append through
the API) and is archived with the window keep=10000. A YAML --config declares
queues and streams (keep, max_age, archived, trim_after), the remote, the beat;
flags and environment variables override it. docs/SERVE.md has the details.
Every volume (archive and accept) is pushed to the remote in the background
within --replicate-every (default 1s) of its first commit not yet pushed,
whatever trim_after says; a quiet volume makes no request.

Every /v1 call on --listen needs "Authorization: Bearer <token>" with the
scope its route needs. A token (at least 16 bytes) is an admin token given by
--token-file FILE or ECHOSTORE_TOKEN, or the config's tokens: [{name, scopes:
[read|write|admin], file}]. With none given, serve uses the admin token in
<data>/serve.token (made on first start: 32 random bytes, mode 0600; a file
with group or other permissions is refused). A --listen address other than
loopback needs a token given, and so does a --resp address other than loopback.
--resp ADDR also answers the Redis protocol (RESP2 and RESP3) on ADDR: XRANGE,
XREVRANGE, XREAD, XLEN and XINFO STREAM of an archived stream read archive and
live tail as one; every other command goes to Redis unchanged, on a connection
of its own per client. Clients send AUTH <token> (a read token reads, a write
token writes); docs/RESP.md has the details. The unix socket <data>/serve.sock needs no
token from serve's own user or root, and refuses every other user.
Every request that changes state must carry Content-Type: application/json,
and no request of another site's page, nor a Host other than the listen
address (or the config's allowed_hosts), is answered.
The remote is checked at start: a malformed URL exits 2, an unreachable
remote is logged and serve starts anyway; GET /healthz answers 200
{"status":"ok","redis":"ok","remote":"ok"}, or 503 with the reason while Redis
or the remote is down. A mem:// remote keeps nothing across a restart and needs
--dev. --restore (config restore: true) rebuilds a data dir that holds no store
(a lost disk) from the remote before serving, as ` + "`echostore restore`" + ` does; a data
dir that holds a store opens as it is. Keep a Redis password out of --redis: give --redis-password-file.
SIGTERM or Ctrl-C: the cycle in flight and the requests in flight finish,
the data dir is closed, and serve exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := server.Config{}
			if config != "" {
				var err error
				if cfg, err = loadServeConfig(config); err != nil {
					return fmt.Errorf("--config %s: %w", config, err)
				}
			}
			given := func(flag, env string) bool {
				if f := cmd.Flag(flag); f != nil && f.Changed {
					return true
				}
				_, ok := os.LookupEnv(env)
				return env != "" && ok
			}
			pick := func(dst *string, flag, env, val string) {
				if given(flag, env) || *dst == "" {
					*dst = val
				}
			}
			pick(&cfg.Listen, "listen", "ECHOSTORE_LISTEN", listen)
			pick(&cfg.RESP, "resp", "ECHOSTORE_RESP", respAddr)
			// One admin token from outside the config, replacing its token:
			// (its tokens: list stays): the deprecated --token if given,
			// else --token-file, else ECHOSTORE_TOKEN.
			switch {
			case given("token", ""):
				g.log.Warn("serve: --token is deprecated: its value shows in ps; use --token-file or ECHOSTORE_TOKEN")
				cfg.Token = token
			case g.tokenFile != "":
				cfg.Token = ""
				cfg.Tokens = append(cfg.Tokens, server.TokenConfig{Name: "--token-file", Scopes: []string{"admin"}, File: g.tokenFile})
			case os.Getenv("ECHOSTORE_TOKEN") != "":
				cfg.Token = os.Getenv("ECHOSTORE_TOKEN")
			}
			if !given("redis", "ECHOSTORE_REDIS") && cfg.Redis != "" && g.redisPasswordFile != "" {
				// The configuration file's Redis, with the file's password.
				u, err := withRedisPassword(cfg.Redis, g.redisPasswordFile)
				if err != nil {
					return usageError("%w", err)
				}
				cfg.Redis = u
			}
			pick(&cfg.Redis, "redis", "ECHOSTORE_REDIS", g.redis)
			pick(&cfg.Data, "data", "ECHOSTORE_DATA", g.data)
			pick(&cfg.Remote, "remote", "ECHOSTORE_REMOTE", g.remote)
			if given("history", "ECHOSTORE_HISTORY") {
				cfg.History = g.historyD
			}
			pick(&cfg.JobOutcomes, "job-outcomes", "ECHOSTORE_JOB_OUTCOMES", g.jobOutcomes)
			// The remote's keys: --remote-key-file (or its variable), else
			// ECHOSTORE_REMOTE_KEY, else the file's remote_key_file.
			envK, kerr := envKey()
			if kerr != nil {
				return kerr
			}
			// (An empty variable turns nothing off.)
			switch {
			case g.remoteKeyFile != "" && given("remote-key-file", "ECHOSTORE_REMOTE_KEY_FILE"):
				cfg.RemoteKeyFile = g.remoteKeyFile
			case !envK.IsZero():
				cfg.RemoteKeyFile, cfg.RemoteKey = "", envK
			}
			if len(g.remoteOldKeyFiles) > 0 && given("remote-old-key-file", "ECHOSTORE_REMOTE_OLD_KEY_FILES") {
				cfg.RemoteOldKeyFiles = g.remoteOldKeyFiles
			}
			if given("beat", "") || cfg.Beat == 0 {
				cfg.Beat = beat
			}
			if given("replicate-every", "") {
				cfg.ReplicateEvery = replicateEvery
			}
			if _, ok := os.LookupEnv("ECHOSTORE_NODE"); ok || cfg.Node == 0 {
				node, err := nodeFromEnv()
				if err != nil {
					return err
				}
				cfg.Node = node
			}
			cfg.Dev = cfg.Dev || dev
			cfg.Restore = cfg.Restore || restore
			cfg.Logger = g.log
			// The configuration is checked before anything is created
			// (the data dir's token below) or opened.
			if _, err := cfg.Checked(); err != nil {
				return err
			}
			if cfg.Restore && cfg.Data != "" {
				// A restore's refusals come before the data dir's token is made.
				if err := echostore.CheckRestore(cfg.NodeConfig()); err != nil {
					return err
				}
			}
			if cfg.Token == "" && len(cfg.Tokens) == 0 && server.IsLoopback(cfg.Listen) && (cfg.RESP == "" || server.IsLoopback(cfg.RESP)) {
				// No token given: the data dir's own admin token, so that
				// other users of the machine cannot use the TCP address.
				// (Another address still needs a token given: ErrInsecure.)
				value, path, created, err := dataDirToken(cfg.Data)
				if err != nil {
					return fmt.Errorf("serve: %w", err)
				}
				cfg.Tokens = append(cfg.Tokens, server.TokenConfig{Name: serveTokenName, Scopes: []string{"admin"}, Value: value})
				g.log.Info("serve: no token given: the API on --listen needs the admin token in the data dir's file (the unix socket needs none for its owner)",
					"token_file", path, "created", created)
			}
			ctx := cmd.Context()
			// The configuration is checked before anything is opened; then
			// the node, then the server over it.
			cfg, err := cfg.Checked()
			if err != nil {
				return err
			}
			node, err := echostore.Open(ctx, cfg.NodeConfig())
			switch {
			case errors.Is(err, server.ErrMemRemote), errors.Is(err, echostore.ErrConfig),
				errors.Is(err, echostore.ErrNotEmpty), errors.Is(err, echostore.ErrRestoreRemote),
				errors.Is(err, echostore.ErrRestorePending):
				return err
			case errors.Is(err, server.ErrDataLocked):
				return fmt.Errorf("%w; stop the other serve, or give this one its own --data", err)
			case err != nil:
				return fmt.Errorf("%w; check --redis, --data and --remote (or the --config file)", err)
			}
			srv, err := server.New(ctx, node, cfg)
			if err != nil {
				_ = node.Close(context.WithoutCancel(ctx))
				return fmt.Errorf("%w; check --redis, --data and --remote (or the --config file)", err)
			}
			err = srv.Run(ctx)
			if cerr := node.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
				err = fmt.Errorf("serve: %w", cerr)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", envOr("ECHOSTORE_LISTEN", server.DefaultListen), "HTTP address [$ECHOSTORE_LISTEN]")
	f.StringVar(&respAddr, "resp", envOr("ECHOSTORE_RESP", ""), "also answer the Redis protocol on this address (e.g. 127.0.0.1:6380; docs/RESP.md) [$ECHOSTORE_RESP]")
	f.StringVar(&config, "config", "", "YAML configuration file (flags and environment variables override it)")
	f.StringVar(&token, "token", "", "an admin bearer token (deprecated: its value shows in ps)")
	_ = f.MarkDeprecated("token", "its value shows in ps and the shell's history: put the token in a file (chmod 600) and give --token-file FILE, or set ECHOSTORE_TOKEN")
	f.DurationVar(&beat, "beat", server.DefaultBeat, "how often the archive driver and retention run")
	f.BoolVar(&restore, "restore", false, "rebuild a data dir that holds no store (a lost disk) from the remote first, lazily (config restore: true; `echostore restore --help`)")
	f.DurationVar(&replicateEvery, "replicate-every", echostore.DefaultReplicateEvery, "push every volume within this of its first commit not yet pushed (negative: off; config replicate_every)")
	f.BoolVar(&dev, "dev", false, "allow a mem:// remote, which keeps nothing across a restart (demos and tests only; config dev: true)")
	return cmd
}
