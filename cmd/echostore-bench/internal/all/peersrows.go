package all

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// errNoPeers is the answer of the peers suite, and of every run of all, in a build
// without the peers.
var errNoPeers = errors.New("this echostore-bench is built without the peers (asynq, River): build it with -tags peers, as make build and make bench do")

// PeersOptions size the peers suite: echostore's accept tier beside asynq
// (github.com/hibiken/asynq) on the same Redis, and River
// (github.com/riverqueue/river) on a private Postgres, in the same run.
type PeersOptions struct {
	Runs    int           // repetitions; each figure is the median of its runs
	Callers []int         // concurrent enqueue callers, one level each
	Window  time.Duration // length of each enqueue level, at most
	// LevelJobs ends an enqueue level early once its callers made that
	// many calls: it bounds the jobs a level leaves to dispatch (and the
	// suite's run time) alike for every system.
	LevelJobs int
	Jobs      int // jobs processed per processing run, by each side

	// AsynqConcurrency is the asynq server's Config.Concurrency (its
	// handler goroutines). The suite measures one Server, and Consumers
	// Servers sharing the jobs (AsynqConcurrency/Consumers each, at least
	// one), as many as echostore's consumers: a Server dequeues one task at
	// a time, so asynq scales its processing out by more Servers.
	AsynqConcurrency int
	// Consumers and ClaimBatch shape echostore's consumer: Consumers
	// goroutines, each claiming up to ClaimBatch jobs and acknowledging
	// them in one call.
	Consumers, ClaimBatch int
}

// The rows of the peers report that carry a goal, and their anchors.
const (
	peerAsynqEnqueue = "asynq Client.Enqueue"
	// peerAsynqDurable is asynq's Client.Enqueue on a second private
	// redis-server started with appendonly yes and appendfsync always:
	// the durable peer of sync enqueue (issue 26), acknowledged only once
	// Redis has fsynced its append-only file.
	peerAsynqDurable  = "durable asynq Client.Enqueue (Redis appendonly yes, appendfsync always)"
	peerAsync         = "echostore async enqueue"
	peerAsyncDispatch = "echostore async enqueue, until in the job stream"
	peerSyncFile      = "echostore sync enqueue, file://"
	peerSyncMinIO     = "echostore sync enqueue, MinIO"
	// peerSyncBatch is a sync batch enqueue (Node.EnqueueBatch) of
	// peerBatchJobs jobs a call from one caller, on a remote ("file://" or
	// "MinIO" follows).
	peerSyncBatch    = "echostore sync batch enqueue of 64 jobs a call, 1 caller"
	peerAsynqServer  = "asynq Server, no-op handler: processing"
	peerAsynqServers = "asynq, %d Servers, no-op handler: processing"
	peerClaimAck     = "echostore claim + ack consumer: processing"
)

// The River rows of the peers report (informational: issue 19 sets no goal
// on River).
const (
	peerRiverInsert  = "River Client.Insert"
	peerRiverProcess = "River Client, no-op Worker: processing"
	peerRiverLeftOut = "River: left out"
)

// River's processing settings: those of River's own benchmark (`river
// bench`: FetchCooldown 2 ms, FetchPollInterval 20 ms; River's defaults,
// 100 ms and 1 s, cap a queue at MaxWorkers jobs per 100 ms), and
// MaxWorkers 1,000, the number its benchmark's notes found best.
const (
	riverMaxWorkers        = 1000
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
)

func peerRow(system string, callers int, what string) string {
	s := "callers"
	if callers == 1 {
		s = "caller"
	}
	return fmt.Sprintf("%s, %d %s: %s", system, callers, s, what)
}

// peersSteps is the progress steps of runPeers.
func peersSteps(o PeersOptions) int { return o.Runs * (len(o.Callers)*6 + 3) }

// moduleVersion is the version of module path linked into the binary (""
// if the build has no module information).
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			return m.Version
		}
	}
	return ""
}
