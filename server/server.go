package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
	"github.com/echostore/echostore/redact"
	"github.com/echostore/echostore/resp"
)

// Sentinel errors of New and Run.
var (
	// ErrInsecure: a non-loopback listen address without a token
	// (Config.withDefaults checks it).
	ErrInsecure = errors.New("serve: a listen address other than loopback needs a token")
	// ErrDataLocked: another process holds the data directory
	// (echostore.ErrDataLocked).
	ErrDataLocked = echostore.ErrDataLocked
	// ErrMemRemote: a mem:// remote without Config.Dev (serve --dev): sync
	// acknowledgements against process memory would be a lie
	// (echostore.ErrMemRemote).
	ErrMemRemote = echostore.ErrMemRemote
	// ErrTooManyStreams: a stream new to the server would exceed
	// Config.MaxStreams; nothing was written for it (HTTP 403,
	// CodeTooManyStreams).
	ErrTooManyStreams = errors.New("serve: too many streams")
)

// SocketName is the unix socket in the data dir on which a running serve
// answers the same API as on its TCP address (mode 0600: the data dir's
// owner only). It is how commands on the same machine reach the server that
// holds the data dir (docs/rfc/0004-processes-and-nodes.md). It authenticates its peer by
// uid (SO_PEERCRED): serve's own user and root have the admin scope
// without a token, any other user is refused (403 CodePeerRefused).
const SocketName = api.SocketName

// ShutdownTimeout bounds how long Run waits, once its context ends, for the
// HTTP requests in flight to finish.
const ShutdownTimeout = 15 * time.Second

// Server is `echostore serve`: the archive driver and trim-only retention on
// a beat, and the HTTP API. Get one with New, run it with Run.
type Server struct {
	cfg    Config
	series series // the console's live charts (series.go)
	log    *slog.Logger
	node   *echostore.Node
	// ownNode: the server opened node (Open) and closes it.
	ownNode bool
	hub     *hub
	m       *metrics
	// health checks Redis and the remote for /healthz (health.go).
	health *health
	ln     net.Listener // --listen
	sock   net.Listener // <data>/SocketName, nil if it could not be made
	http   *http.Server
	// resp is the RESP front on respLn (Config.RESP), nil without one
	// (resp.go).
	resp   *resp.Server
	respLn net.Listener
	// uid is serve's own user: with root, the socket peers it trusts
	// without a token (peer.go).
	uid int

	done chan struct{} // closed when shutdown starts: SSE streams end
	// beatMu orders a beat (with the node's discovery, which adopts into
	// streams) and a delete: a stream deleted is not declared again by a
	// beat's discovery that listed it before (the node orders its own beat
	// and Delete the same way).
	beatMu  sync.Mutex
	mu      sync.Mutex
	streams map[names.StreamRef]stream
	// admitted holds the streams counted against cfg.MaxStreams: those
	// declared, and those cycled through the API undeclared (admit).
	admitted map[names.StreamRef]bool
	watched  map[names.StreamRef]bool // archived streams whose volume is watched (watchVolume)
	runCtx   context.Context          // the volume watcher's context, set by Run
	fm       *fleetMetrics            // the group's gauges (fleet.go)
	// unannounced are the archived streams met through the API whose
	// registration or announcement to the group failed: the beat retries.
	unannounced map[names.StreamRef]bool
	wg          sync.WaitGroup // the LSN publisher, the heartbeat and the sampler
	closed      bool
	lsn         lsnWatch // the watched volumes' LSN events (watchVolume)
}

// lsnWatch is what serve keeps of the LSN events of its archived streams'
// volumes: vols are the volumes watched (by name), pending the events not
// yet published, one per volume (the newest kind), and wake wakes the one
// goroutine that publishes them (lsnLoop). Server.mu guards vols and
// pending.
type lsnWatch struct {
	vols    map[string]names.Volume
	pending map[string]string
	wake    chan struct{}
}

// NodeConfig returns the node's part of c: the echostore.Config that
// serve opens (Open). The outbox has no time bound of its own: the
// server's checkpointer (CheckpointEvery) is it, and times each
// checkpoint. serve opens every remote driver (graft/remote/drivers) and
// replicates in the background every ReplicateEvery (negative: off; c
// checked, so 0 is the default), and runs the background remote GC
// (gc_every, gc_grace; a negative gc_every turns it off).
func (c Config) NodeConfig() echostore.Config {
	nc := echostore.Config{Data: c.Data, Redis: c.Redis, Remote: c.Remote, RemoteKeys: c.remoteKeys, Dev: c.Dev, NodeNumber: c.Node,
		MaxQueues: c.MaxQueues, FlushInterval: -1, AllowEviction: c.AllowEviction, Logger: c.Logger,
		ReplicateEvery: c.ReplicateEvery, Drivers: drivers.All(), GCEvery: max(c.GCEvery, 0), GCGrace: c.GCGrace,
		CacheSize: int64(c.CacheSize), History: c.History, JobOutcomes: c.outcomes}
	if c.Restore {
		nc.Restore = echostore.RestoreIfEmpty
	}
	return nc
}

// Open checks cfg, opens its node (echostore.Open with cfg.NodeConfig())
// and returns the Server over it (New), which closes the node when Run
// returns.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	node, err := echostore.Open(ctx, cfg.NodeConfig())
	if err != nil {
		return nil, err
	}
	s, err := newServer(ctx, node, cfg, true)
	if err != nil {
		return nil, err // newServer closed the node
	}
	return s, nil
}

// New returns the Server of node: it declares the configured streams and
// listens on cfg.Listen. It does not serve until Run. The node must have
// Redis (Config.Redis), and cfg's node fields (Data, Redis, Remote, Node,
// MaxQueues) should be those node was opened with (Config.NodeConfig, with
// FlushInterval -1: the server checkpoints the outbox); the caller closes
// node once Run has returned.
func New(ctx context.Context, node *echostore.Node, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return newServer(ctx, node, cfg, false)
}

// newServer is New with cfg checked; own makes the server close node (also
// when newServer fails).
func newServer(ctx context.Context, node *echostore.Node, cfg Config, own bool) (_ *Server, err error) {
	s := &Server{
		cfg:         cfg,
		log:         cfg.Logger,
		node:        node,
		ownNode:     own,
		hub:         newHub(),
		m:           newMetrics(),
		done:        make(chan struct{}),
		streams:     map[names.StreamRef]stream{},
		admitted:    map[names.StreamRef]bool{},
		watched:     map[names.StreamRef]bool{},
		unannounced: map[names.StreamRef]bool{},
		uid:         os.Getuid(),
		lsn:         lsnWatch{vols: map[string]names.Volume{}, pending: map[string]string{}, wake: make(chan struct{}, 1)},
	}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()
	if !node.HasRedis() {
		return nil, fmt.Errorf("%w: the node has no Redis", ErrConfig)
	}
	s.fm = newFleetMetrics(s.m.reg)
	s.health = newHealth(s, cfg.Redis, node.RemoteURL())
	// An unavailable remote does not stop the start (a restart during an
	// outage would loop): it is logged, reported by /healthz (503), and
	// every sync enqueue and push answers 503 until it is back.
	if h := s.health.check(ctx); h.Remote != "ok" {
		s.log.Error("serve: the remote is unavailable; starting anyway: sync enqueues and pushes fail (503) until it is back, /healthz reports it",
			"remote", redact.URL(node.RemoteURL()), "reason", h.Remote)
	}
	s.m.watchGC(node)
	s.m.watchOutbox(node.OutboxStats, node.OutboxK())
	s.m.reg.MustRegister(newQueueCollector(s.m.jobs, node.QueueStatus))
	s.m.watchNode(node, cfg.Logger)
	for _, st := range cfg.declaredStreams() { // checked by withDefaults
		if err := s.declare(st); err != nil {
			return nil, err
		}
	}
	s.ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("serve: listen %s: %w", cfg.Listen, err)
	}
	s.sock = s.listenSocket()
	if err := s.listenRESP(); err != nil {
		return nil, err
	}
	s.http = &http.Server{
		Handler: s.Handler(),
		// A socket connection carries its peer's uid (SO_PEERCRED).
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// listenSocket listens on <data>/SocketName. The server holds the data
// dir's lock, so a socket file already there is a dead server's and is
// replaced. A failure is logged: the TCP API does not depend on it.
func (s *Server) listenSocket() net.Listener {
	path := s.SocketPath()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("serve: no unix socket: a file is in the way", "path", path, "err", err)
		return nil
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		s.log.Warn("serve: no unix socket", "path", path, "err", err)
		return nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		s.log.Warn("serve: no unix socket: cannot restrict it to the owner", "path", path, "err", err)
		return nil
	}
	return ln
}

// SocketPath is the path of the server's unix socket, <data>/SocketName.
func (s *Server) SocketPath() string { return filepath.Join(s.cfg.Data, SocketName) }

// IsLoopback reports whether a listen address (host:port) is on loopback
// only: localhost or a loopback IP.
func IsLoopback(addr string) bool { return loopback(addr) }

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// declare makes the node keep a stream bounded on every beat, by an
// archive cycle or by trim-only retention (echostore.Node.Declare).
func (s *Server) declare(st stream) error {
	if err := s.node.Declare(st.ref, st.policy()); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.m.declared(st.ref, st.archived)
	k := st.ref
	s.mu.Lock()
	s.streams[k] = st
	s.admitted[k] = true
	ctx := s.runCtx
	watch := ctx != nil && st.archived && !s.watched[k] // two first appends racing: one watcher
	if watch {
		s.watched[k] = true
	}
	s.mu.Unlock()
	if watch {
		s.watchVolume(ctx, st)
	}
	return nil
}

// forget stops cycling ref (archive driver, retention, an armed fault)
// and returns its settings, if it was declared.
func (s *Server) forget(ref names.StreamRef) (stream, bool) {
	s.mu.Lock()
	prev, ok := s.streams[ref]
	delete(s.streams, ref)
	delete(s.admitted, ref)
	s.mu.Unlock()
	s.node.Undeclare(ref) // and its armed fault
	return prev, ok
}

// touch returns the stream's settings, declaring it with the defaults on
// first use.
func (s *Server) touch(ref names.StreamRef) (stream, error) {
	st, _, err := s.touchFresh(ref)
	return st, err
}

// touchFresh is touch, and reports whether this call declared the stream.
func (s *Server) touchFresh(ref names.StreamRef) (_ stream, fresh bool, _ error) {
	s.mu.Lock()
	got, ok := s.streams[ref]
	s.mu.Unlock()
	if ok {
		return got, false, nil
	}
	res, ok := s.cfg.declared(ref) // deleted, then used again
	if !ok {
		var err error
		if res, err = s.cfg.resolve(ref, StreamConfig{}); err != nil {
			return stream{}, false, err
		}
	}
	if err := s.admit(ref); err != nil {
		return stream{}, false, err
	}
	s.log.Info("serve: stream in use", ref.LogAttr(), "archived", res.archived,
		"keep", res.window.Keep, "max_age", res.window.MaxAge)
	if err := s.declare(res); err != nil {
		s.unadmit(ref)
		return stream{}, false, err
	}
	return res, true, nil
}

// admit counts ref against cfg.MaxStreams before anything is written for
// it: a stream already counted passes, a new one beyond the limit fails
// with ErrTooManyStreams.
func (s *Server) admit(ref names.StreamRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admitted[ref] {
		return nil
	}
	if len(s.admitted) >= s.cfg.MaxStreams {
		return fmt.Errorf("%w: stream %s refused: this server has %d streams, as many as max_streams allows; "+
			"raise max_streams in serve's configuration file (--config) and restart serve, "+
			"or delete the streams no longer needed (DELETE /v1/streams/{q}/{s})", ErrTooManyStreams, ref, len(s.admitted))
	}
	s.admitted[ref] = true
	return nil
}

// unadmit gives back the place admit took for ref if it was not declared
// since.
func (s *Server) unadmit(ref names.StreamRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, declared := s.streams[ref]; !declared {
		delete(s.admitted, ref)
	}
}

// lookup returns the stream's settings if it is declared.
func (s *Server) lookup(ref names.StreamRef) (stream, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.streams[ref]
	return got, ok
}

// Run serves until ctx ends, then shuts down gracefully: the beat finishes
// the cycle in flight, the HTTP requests in flight finish (bounded by
// ShutdownTimeout), server-sent event streams end, and, if the server
// opened its node (Open), the node is closed. It returns nil after a clean
// shutdown.
func (s *Server) Run(ctx context.Context) error {
	runCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	// One goroutine publishes the LSN events of every watched volume.
	stopLSN := s.node.OnLSN(s.onLSN)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.lsnLoop(runCtx)
	}()

	s.mu.Lock()
	s.runCtx = runCtx
	var archived []stream
	for k, st := range s.streams {
		if st.archived {
			archived = append(archived, st)
			s.watched[k] = true
		}
	}
	s.mu.Unlock()
	for _, st := range archived {
		s.watchVolume(runCtx, st)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.sampleLoop(runCtx)
	}()

	httpErr := make(chan error, 2)
	go func() { httpErr <- s.http.Serve(s.ln) }()
	if s.sock != nil {
		go func() { httpErr <- s.http.Serve(s.sock) }()
	}
	s.serveRESP(runCtx)
	s.log.Info("serve: listening", "addr", s.Addr().String(), "socket", s.sock != nil, "data", s.cfg.Data, "beat", s.cfg.Beat)

	// The node runs the beat, its group's heartbeats and the outbox's
	// checkpoints (Node.Run); each beat is serve's (Beat), around the
	// node's.
	beatCtx, stopBeat := context.WithCancel(ctx) // ends with ctx, or when HTTP fails
	defer stopBeat()
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		_ = s.node.Run(beatCtx, echostore.RunOptions{Beat: s.cfg.Beat, CheckpointEvery: s.cfg.CheckpointEvery,
			OnCheckpoint: s.checkpointed, BeatFunc: s.Beat, Addr: s.Addr().String(), OnGroup: s.onGroup}) // the node has Redis (newServer)
	}()

	var err error
	select {
	case <-ctx.Done():
	case err = <-httpErr:
		err = fmt.Errorf("serve: http: %w", err)
	}
	s.log.Info("serve: shutting down")
	close(s.done)
	s.hub.closeAll()
	stopBeat()
	<-beatDone // the beat in flight finishes (it runs without ctx's cancellation); Run has left the group
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if herr := s.http.Shutdown(sctx); herr != nil && err == nil {
		err = fmt.Errorf("serve: http shutdown: %w", herr)
	}
	s.stopRESP()
	stopLSN()
	stopWatch()
	s.wg.Wait()
	if cerr := s.closeAll(); cerr != nil && err == nil {
		err = cerr
	}
	s.log.Info("serve: stopped")
	return err
}

// closeAll closes the listeners and, if the server owns it, the node,
// once.
func (s *Server) closeAll() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close() // already closed after Serve: error ignored
	}
	if s.sock != nil {
		s.sock.Close() // removes the socket file
	}
	s.stopRESP()
	if !s.ownNode {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	// The node closes its accept tier first: the committers finish the
	// batches they hold; what is still pending stays in the outbox for
	// the next start.
	if err := s.node.Close(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// every calls f every d until ctx ends; a call that has begun runs to its
// end.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// Beat is serve's beat, which the node's Run calls after its heartbeat:
// it retries the announcements that failed, runs the node's beat
// (Node.Beat: the discovery of the archived streams to adopt, when due,
// which serve's adopt takes within max_streams; the cycles of the streams
// the node Cycles that are due or have an armed fault; trim-only
// retention), and refreshes the group's and the volumes' gauges.
func (s *Server) Beat(ctx context.Context) {
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	defer s.m.beats.Inc()
	s.announceAgain(ctx)
	var adopt func(context.Context, echostore.Adoptable) error
	if *s.cfg.Discover {
		adopt = s.adopt
	}
	s.node.Beat(ctx, echostore.BeatOptions{
		Adopt: adopt,
		Sweep: s.cfg.Sweep, Every: s.cfg.Beat,
		OnPicked: func(p echostore.BeatPicked) {
			s.m.beatStreams.WithLabelValues("due").Set(float64(p.Due))
			s.m.beatStreams.WithLabelValues("swept").Set(float64(p.Swept))
			s.m.beatStreams.WithLabelValues("probed").Set(float64(p.Probed))
			s.m.beatStreams.WithLabelValues("idle").Set(float64(p.Idle))
		},
		OnCycle: func(r echostore.CycleReport) {
			if !r.Result.Missing { // a declared stream whose key does not exist yet is not reported
				s.reportCycle(ctx, r.Ref, r.Result, r.Err)
			}
		},
		OnTrim: func(r echostore.TrimReport) { s.reportTrim(ctx, r) },
	})
	s.countShare()
	s.refreshVolumes(ctx)
}

// checkpointed observes one checkpoint of the accept outbox (Node.Run
// with CheckpointEvery: the time bound of its loss window, which serve
// keeps instead of the outbox, accept.Options.FlushInterval, so that each
// checkpoint is timed; the outbox still cuts a block by itself every K
// records).
func (s *Server) checkpointed(took time.Duration, err error) {
	if took == 0 && err == nil {
		return // nothing was pending
	}
	if err != nil {
		s.log.Warn("serve: checkpoint the accept outbox", "err", err)
		return
	}
	s.m.checkpoint.Observe(took.Seconds())
}

// checkpoint checkpoints the accept outbox now (as Run's checkpoints do)
// and observes it.
func (s *Server) checkpoint(ctx context.Context) { s.checkpointed(s.node.CheckpointOutbox(ctx)) }

// cycle runs one archive cycle of the stream now (the HTTP cycle) with
// the window w and st's trim_after and retention (through the fault, if
// one is armed: Node.ArmFault).
func (s *Server) cycle(ctx context.Context, ref names.StreamRef, st stream, w archive.Window) (echostore.CycleResult, error) {
	res, err := s.node.Cycle(ctx, ref, echostore.CycleOptions{Window: w, TrimAfter: st.trimAfter, Retain: st.retain})
	ar := archive.CycleResult{Folded: res.Folded, Trimmed: res.Trimmed, Dropped: res.Dropped, State: res.State,
		Stalled: res.StalledGroups, TooLarge: res.TooLarge}
	if res.AppTrimmed != nil {
		ar.AppTrimmed = *res.AppTrimmed
	}
	s.reportCycle(ctx, st.ref, ar, err)
	return res, err
}

// reportCycle records an archive cycle in the metrics and the events.
func (s *Server) reportCycle(ctx context.Context, ref names.StreamRef, res archive.CycleResult, err error) {
	result := "ok"
	q, st := refLabels(ref) // metric labels
	ev := CycleEvent{Queue: q, Stream: st, Path: apiPath(ref), Archived: true, Folded: res.Folded, Trimmed: res.Trimmed,
		Archive: res.State.Pages, LSN: res.State.LSN, Live: -1, Lag: -1, Volume: ref.Volume().String()}
	if !res.State.Empty() {
		ev.Watermark = echostore.FormatID(ref, res.State.W)
	}
	if err != nil {
		result = "error"
		ev.Error = err.Error()
		s.m.foldErrors.WithLabelValues(q, st).Inc()
		s.log.Warn("serve: archive cycle failed; nothing unfolded was trimmed", ref.LogAttr(), "err", err)
	}
	if t := res.AppTrimmed; t.Detected() {
		s.m.appTrims.WithLabelValues(q, st).Inc()
		ev.AppTrimmed = &t
		s.log.Warn("serve: another client removed entries of an archived stream above its watermark before they were folded",
			"stream", ref.String(), "kind", t.Kind, "from", t.From)
	}
	if len(res.TooLarge) > 0 {
		s.m.tooLarge.WithLabelValues(q, st).Add(float64(len(res.TooLarge)))
		ev.TooLarge = res.TooLarge
		s.log.Warn("serve: an entry larger than the archive holds is not archived; the trim holds below it until it is removed",
			ref.LogAttr(), "entries", len(res.TooLarge), "first", res.TooLarge[0].XID, "bytes", res.TooLarge[0].Bytes, "max", archive.MaxRecordBytes)
	}
	s.m.cycles.WithLabelValues(q, st, "archive", result).Inc()
	s.m.folded.WithLabelValues(q, st).Add(float64(res.Folded))
	s.m.trimmed.WithLabelValues(q, st, "archive").Add(float64(res.Trimmed))
	if err == nil {
		s.m.depth.WithLabelValues(q, st).Set(float64(res.State.Pages))
		s.reportStalled(ref, res.Stalled)
		ev.Stalled = len(res.Stalled)
	}
	if tail, terr := s.node.LiveTail(ctx, ref, res.State); terr == nil {
		ev.Live, ev.Lag = tail.Length, tail.AboveW
		s.m.live.WithLabelValues(q, st).Set(float64(tail.Length))
		s.m.wLag.WithLabelValues(q, st).Set(tail.Lag.Seconds())
	}
	s.m.tally.cycled(ref.String(), ev)
	s.hub.publish("cycle/"+ref.String(), "cycle", ev)
	s.publishVolume(ctx, ref.Volume(), "")
}

// reportStalled records a successful cycle's stalled consumer groups in
// the metrics and, while there are any and once when they are gone, in a
// "stalled" event. The archiver logs each group that becomes stalled.
func (s *Server) reportStalled(ref names.StreamRef, groups []archive.StalledGroup) {
	q, st := ref.Queue().String(), ref.Stream().String()
	s.m.stalled.WithLabelValues(q, st).Set(float64(len(groups)))
	policy := archive.StalledHold // a cycle passes all its stalled groups or none
	if len(groups) > 0 && groups[0].Passed {
		policy = archive.StalledArchive
	}
	for range groups {
		s.m.stalledN.WithLabelValues(q, st, policy.String()).Inc()
	}
	key := "stalled/" + ref.String()
	if len(groups) == 0 {
		if s.hub.has(key) {
			s.hub.publish(key, "stalled", StalledEvent{Queue: q, Stream: st, Policy: policy.String(), Groups: []archive.StalledGroup{}})
			s.hub.forget(key)
		}
		return
	}
	s.hub.publish(key, "stalled", StalledEvent{Queue: q, Stream: st, Policy: policy.String(), Groups: groups})
}

// reportTrim records a retention trim in the metrics and the events.
func (s *Server) reportTrim(ctx context.Context, r mq.TrimReport) {
	result := "ok"
	q, st := refLabels(r.Ref) // metric labels
	if r.Err != nil {
		if errors.Is(r.Err, mq.ErrArchived) {
			s.log.Warn("serve: stream declared unarchived is registered as archived: retention leaves it alone",
				"queue", q, "stream", st)
		} else {
			s.log.Warn("serve: retention trim failed", "queue", q, "stream", st, "err", r.Err)
		}
		result = "error"
	}
	s.m.cycles.WithLabelValues(q, st, "retention", result).Inc()
	s.m.trimmed.WithLabelValues(q, st, "retention").Add(float64(r.Result.Trimmed))
	ev := CycleEvent{Queue: q, Stream: st, Path: apiPath(r.Ref), Trimmed: r.Result.Trimmed, Live: -1, Lag: -1}
	if r.Err != nil {
		ev.Error = r.Err.Error()
	}
	if tail, err := s.node.LiveTail(ctx, r.Ref, archive.State{}); err == nil {
		ev.Live, ev.Lag = tail.Length, tail.Length
		s.m.live.WithLabelValues(q, st).Set(float64(tail.Length))
	}
	s.m.tally.cycled(r.Ref.String(), ev)
	s.hub.publish("cycle/"+r.Ref.String(), "cycle", ev)
}

// refreshVolumes sets the LSN gauges of every volume of the data dir and
// publishes an "lsn" event for each volume whose LSNs moved since the last
// event (the accept volumes, whose commits no cycle reports, included).
func (s *Server) refreshVolumes(ctx context.Context) {
	vols, err := s.node.Volumes(ctx)
	if err != nil {
		s.log.Warn("serve: list volumes", "err", err)
		return
	}
	for _, in := range vols.Volumes {
		vol := in.Volume.String()
		s.m.localLSN.WithLabelValues(vol).Set(float64(in.LocalLSN))
		s.m.remoteLSN.WithLabelValues(vol).Set(float64(in.RemoteLSN))
		s.hub.publishChanged("lsn/"+vol, "lsn", LSNEvent{Volume: vol, LocalLSN: in.LocalLSN, RemoteLSN: in.RemoteLSN, Lag: in.Lag})
	}
}

// publishVolume publishes an "lsn" event with the volume's LSNs as the data
// dir has them.
func (s *Server) publishVolume(ctx context.Context, vol names.Volume, kind string) {
	in, err := s.node.VolumeStatus(ctx, vol)
	if err != nil {
		return // not in this data dir (yet)
	}
	name, lag := vol.String(), in.Lag
	s.m.localLSN.WithLabelValues(name).Set(float64(in.LocalLSN))
	s.m.remoteLSN.WithLabelValues(name).Set(float64(in.RemoteLSN))
	s.hub.publish("lsn/"+name, "lsn", LSNEvent{Volume: name, LocalLSN: in.LocalLSN, RemoteLSN: in.RemoteLSN, Lag: lag, Kind: kind})
}

// watchVolume makes the archive volume's LSN events "lsn" events: each
// commit or push of it that the node announces on its lane (mq.VolumeLane)
// is handed to the server in process (echostore.Node.OnLSN) and published
// by lsnLoop. The data dir is this process's alone, so every commit and
// push of its volumes is announced here; a watched volume costs a map
// entry, and no goroutine, Redis connection or command. (ctx is lsnLoop's,
// given to Run.)
func (s *Server) watchVolume(_ context.Context, st stream) {
	v := st.ref.Volume()
	s.mu.Lock()
	s.lsn.vols[v.String()] = v
	s.mu.Unlock()
}

// onLSN takes one LSN event of the node (on the goroutine that committed or
// pushed: it does not block): an event of a watched volume is left for
// lsnLoop, replacing one of the same volume not yet published.
func (s *Server) onLSN(e graft.Event) {
	s.mu.Lock()
	_, ok := s.lsn.vols[e.Volume]
	if ok {
		s.lsn.pending[e.Volume] = e.Kind
	}
	s.mu.Unlock()
	if ok {
		select {
		case s.lsn.wake <- struct{}{}:
		default: // already woken
		}
	}
}

// lsnLoop publishes the pending LSN events (onLSN) until ctx ends, each as
// an "lsn" event with the data dir's own reading of the volume, which is at
// least the announced LSN.
func (s *Server) lsnLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.lsn.wake:
		}
		s.mu.Lock()
		pending := s.lsn.pending
		s.lsn.pending = make(map[string]string, len(pending))
		vols := make(map[string]names.Volume, len(pending))
		for name := range pending {
			vols[name] = s.lsn.vols[name]
		}
		s.mu.Unlock()
		for name, kind := range pending {
			s.publishVolume(ctx, vols[name], kind)
		}
	}
}

// deleteStream deletes the archived stream ref (archive.Archiver.Delete
// with serve's store, remote attached, and Redis). It holds the beat back
// and stops cycling the stream first, so that no cycle re-creates the
// volume after the delete; a stream the configuration declares is deleted
// too and cycled again only once used through the API or after a restart.
// A failed delete declares the stream again as it was.
func (s *Server) deleteStream(ctx context.Context, ref names.StreamRef) (echostore.DeleteResult, error) {
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	prev, declared := s.forget(ref)
	res, err := s.node.Delete(ctx, ref)
	if err != nil {
		if declared {
			if derr := s.declare(prev); derr != nil {
				s.log.Error("serve: stream not declared again after a failed delete", ref.LogAttr(), "err", derr)
			}
		}
		return res, err
	}
	// The stream's gauges and newest cycle event go with it.
	s.hub.forget("cycle/" + ref.String())
	s.m.tally.forget(ref.String())
	s.hub.forget("stalled/" + ref.String())
	for _, g := range []*prometheus.GaugeVec{s.m.live, s.m.depth, s.m.wLag, s.m.stalled} {
		g.DeleteLabelValues(refLabels(ref))
	}
	s.log.Info("serve: archived stream deleted; no longer cycled", ref.LogAttr(), "volume", res.Volume,
		"declared", declared)
	// An append through the API during the delete declared the stream
	// again (touch), and the node's delete undeclared it after: the node
	// keeps what serve keeps.
	if st, ok := s.lookup(ref); ok {
		if derr := s.node.Declare(ref, st.policy()); derr != nil {
			s.log.Error("serve: a stream used during its delete is not declared again", ref.LogAttr(), "err", derr)
		}
	}
	return res, nil
}
