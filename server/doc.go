// Package server is `echostore serve`: the long-running process that holds a
// data dir, runs the archive driver and trim-only retention on a beat, and
// serves the HTTP API, server-sent events, a dashboard and Prometheus
// metrics.
//
// # What it owns
//
//   - The data dir's graft store (<data>/graft), opened writable and locked
//     from New until Run returns; a second process on the same data dir is
//     refused at once (ErrDataLocked), never left waiting.
//   - One Redis client (mq.Client) and the remote (graft/remote), attached
//     to the store so that trim_after: remote can push. The node's beat
//     discovers the archived streams registered in Redis it may adopt
//     (echostore.BeatOptions.Adopt), and serve's adopt (discover.go) takes
//     them within max_streams, unless Config.Discover is false.
//   - Two archive drivers (archive.Driver: trim after local, trim after
//     remote) and one mq.Retention, cycled together on each beat.
//   - The accept outbox (<data>/accept/outbox) and the two-tier enqueue
//     (accept.Tier) over it, the store and Redis.
//   - The unix socket <data>/serve.sock (SocketName), mode 0600, on which the
//     same API answers; removed on shutdown. The CLI's commands that need
//     the data dir go through it while serve runs (docs/rfc/0004-processes-and-nodes.md).
//   - The fault route (fault.go, only with Config.Faults): an admin arms a
//     fault for a stream's next cycle (echostore.Node.ArmFault), which
//     folds, then fails before the trim.
//   - A private prometheus.Registry: nothing is registered globally.
//
// # Promises
//
//   - Streams come into being on first use: the first append through the API
//     declares the stream with Config.Defaults (archived, keep DefaultKeep,
//     trim after local, unless the configuration says otherwise). Streams
//     named in Config.Queues are cycled from the first beat on, and so are
//     archived streams registered in Redis whose volume is in this data dir
//     or that were never folded (discovery, on the first beat and at most
//     every echostore.DefaultDiscoverEvery, or at once after the group
//     changed).
//   - Streams are bounded: at most Config.MaxStreams (declared, met through
//     the API, cycled through it undeclared, or discovered) at a time. A
//     new stream beyond it is refused with ErrTooManyStreams (HTTP 403,
//     too_many_streams) before anything is written for it; discovery
//     leaves it alone. Deleting a stream frees its place.
//   - An injected fault never loses a record: the faulted cycle's fold is
//     committed and its trim skipped (ErrInjectedFault), so the stream
//     over-retains until the next cycle trims.
//   - Names are checked (package names) before any side effect; a refused
//     request declares nothing and writes nothing.
//   - Every API error is JSON {"error":{"code":…,"message":…}} with a status
//     that says what kind it is (the Code… constants); bodies are bounded
//     by Config.MaxBody.
//   - The browser boundary (boundary.go), before any route, token check or
//     body read: a Host other than the listen address (or
//     Config.AllowedHosts) is 421 misdirected on every route; on every
//     route but the dashboard page, an Origin that is not the server's or a
//     Sec-Fetch-Site other than same-origin or none is 403 cross_site; a
//     request that can change state (any method but GET, HEAD, OPTIONS)
//     without Content-Type application/json or application/x-ndjson is 415
//     unsupported_media_type, an empty body too. No page of another site
//     can change state: it cannot send that Content-Type without a CORS
//     preflight, which the server never grants. Every answer carries
//     Content-Security-Policy frame-ancestors 'none' and X-Frame-Options
//     DENY.
//   - Records are rendered by mq.AppendJSON only: a read through the API is
//     byte-identical to `echostore stream read`, from live and archive alike.
//   - With a token (Config.Token, Config.Tokens; each at least MinTokenLen
//     bytes, else refused at start) every /v1 call, and /metrics unless
//     Config.MetricsPublic, needs "Authorization: Bearer <token>", compared
//     in constant time, with the Scope its route needs (auth.go,
//     routeScope): 401 without a known token, 403 forbidden without the
//     scope. A listen address other than loopback is refused without a
//     token (ErrInsecure). GET /v1/events, which a browser's EventSource
//     reads without headers, also accepts the HttpOnly, SameSite=Strict
//     session cookie that POST /v1/session sets; it carries ScopeRead alone.
//   - Shutdown (Run's context ends) loses nothing: the beat's cycle in flight
//     runs to its end, requests in flight finish (bounded by
//     ShutdownTimeout), event streams end, the store, remote and Redis client
//     are closed, and Run returns nil.
//   - /v1/events is fed by notifications, never by a polling loop: each cycle
//     (archive or retention) publishes a "cycle" event and the volume's "lsn"
//     event in-process, and the archive volumes' LSN lanes (mq.VolumeLane,
//     read with a blocking XREAD) publish "lsn" events of commits and pushes
//     announced by other processes.
//
// docs/SERVE.md is the user's reference: routes, configuration keys,
// metrics, events.
package server
