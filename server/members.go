package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// The nodes of a group share its archived streams. A group is the serve
// processes on one Redis whose remotes have one identity (graft's identity
// object: the same bucket and prefix, whatever URL names it). Each node
// heartbeats in Redis; each archived stream is cycled by the live node of
// the group that rendezvous hashing picks for it (the highest hash of the
// node's id and the stream), so that a node cycles its share and does not
// contend for the leases of the others'; when a node joins or leaves, only
// the streams whose pick changes move. The stream's lease stays the fence:
// a cycle holds it, so two nodes that disagree for a moment about the
// membership never cycle one stream at once (docs/SERVE.md, "Several
// nodes").

// NodeIDFile is the file of the data dir that holds the node's id: 32 hex
// digits (16 random bytes) and a line feed, written by the first serve on
// the data dir and kept for its life, so that a restarted node is the same
// node to the others.
const NodeIDFile = echostore.NodeIDFile

// HeartbeatTTL is how long a node's heartbeat lives in Redis: a node that
// stops heartbeating (killed, cut off) is out of its group this long after
// its last heartbeat. It equals the archive lease's TTL, so that a dead
// node's streams are taken over within the lease TTL and one beat.
const HeartbeatTTL = archive.DefaultLeaseTTL

// HeartbeatEvery is how often a node heartbeats, beside the beat (whose
// cycles may take longer than the TTL).
const HeartbeatEvery = HeartbeatTTL / 5

// ErrNodeID: the data dir's NodeIDFile is not a node id.
var ErrNodeID = errors.New("serve: the data dir's node-id file is not a node id")

// nodeTag is the hashtag of the group keys: echostore's namespace's own
// slot on a Cluster (no queue's keys are named like them).
const nodeTag = "emq"

// NodesKey is the sorted set of the live nodes of group g: member = node
// id, score = when its heartbeat expires (Redis server time, Unix ms).
func NodesKey(g string) string { return "emq:{" + nodeTag + "}:nodes:" + g }

// NodeKey is the heartbeat of node id of group g: a string (JSON: addr,
// node, started) with the heartbeat's TTL.
func NodeKey(g, id string) string { return "emq:{" + nodeTag + "}:node:" + g + ":" + id }

// StreamsEpochKey is group g's counter of archived streams met: a node
// INCRs it when it meets an archived stream through its API, and the
// others discover the archived streams again when it moves.
func StreamsEpochKey(g string) string { return NodesKey(g) + ":streams" }

// scriptHeartbeat refreshes a node's heartbeat and lists its group.
//
//	KEYS[1] NodesKey, KEYS[2] NodeKey of the caller, KEYS[3] StreamsEpochKey
//	ARGV[1] TTL in ms, ARGV[2] the caller's id, ARGV[3] its heartbeat value
//
// It drops the members whose heartbeat expired and replies {epoch, id1,
// ms1, id2, ms2, …}: the streams epoch ("0" if none) and each live node
// with the milliseconds its heartbeat has left. The set and the epoch
// expire with the last heartbeat.
var scriptHeartbeat = mq.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ttl)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
local out = {redis.call('GET', KEYS[3]) or '0'}
local m = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #m, 2 do
  out[#out + 1] = m[i]
  out[#out + 1] = tostring(tonumber(m[i + 1]) - now)
end
return out
`)

// scriptLeave removes a node from its group. KEYS[1] NodesKey, KEYS[2]
// NodeKey of the caller; ARGV[1] its id.
var scriptLeave = mq.NewScript(`
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
`)

// scriptStreamMet moves the streams epoch. KEYS[1] StreamsEpochKey; ARGV[1]
// its TTL in ms.
var scriptStreamMet = mq.NewScript(`
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
`)

// scriptNodeInfos reads the heartbeats KEYS (NodeKey of some nodes of one
// group): their values, "" for one expired.
var scriptNodeInfos = mq.NewScript(`
local out = {}
for i, k in ipairs(KEYS) do out[i] = redis.call('GET', k) or '' end
return out
`)

// nodeInfo is a heartbeat's value.
type nodeInfo struct {
	Addr    string `json:"addr"`
	Node    int    `json:"node"`
	Started string `json:"started"`
}

// loadNodeID returns the node id of data dir dir, writing a new one on
// first use.
func loadNodeID(dir string) (string, error) {
	path := filepath.Join(dir, NodeIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id, err := parseNodeID(b)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("serve: node id: %w", err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("serve: node id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := durable.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("serve: write the node id: %w", err)
	}
	return id, nil
}

// parseNodeID decodes the bytes of a NodeIDFile: 32 lower-case hex digits,
// then a line feed or nothing. Anything else wraps ErrNodeID.
func parseNodeID(b []byte) (string, error) {
	id := strings.TrimSuffix(string(b), "\n")
	if len(id) != 32 || strings.ToLower(id) != id {
		return "", fmt.Errorf("%w: want 32 lower-case hex digits", ErrNodeID)
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", fmt.Errorf("%w: want 32 lower-case hex digits", ErrNodeID)
	}
	return id, nil
}

// view is one reading of a group's membership.
type view struct {
	group string
	self  string
	nodes []string // the live nodes' ids, sorted; self among them
	epoch string   // the streams epoch
	// gen counts the changes of nodes this node saw since it started (a
	// node that joined and left again makes two): the beat's memos hold
	// under one gen only (idle.go).
	gen uint64
	// left is, per live node, the milliseconds its heartbeat had left
	// when this view was read (GET /v1/nodes).
	left map[string]int64
}

// owner returns the live node that cycles ref: the highest rendezvous
// score, ties to the lower id.
func (v *view) owner(ref names.StreamRef) string {
	var best string
	var bestScore uint64
	for _, n := range v.nodes {
		if sc := score(n, ref); best == "" || sc > bestScore {
			best, bestScore = n, sc
		}
	}
	return best
}

// score is the rendezvous score of node id for ref: FNV-1a over the id, a
// zero byte and the stream's name, finished by SplitMix64's mixer.
func score(id string, ref names.StreamRef) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(ref.String()))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// fleetMetrics are the gauges of the node's group.
type fleetMetrics struct {
	nodesLive, owned, elsewhere prometheus.Gauge
}

// newFleetMetrics returns the group's gauges, registered on reg.
func newFleetMetrics(reg *prometheus.Registry) *fleetMetrics {
	m := &fleetMetrics{
		nodesLive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "echostore_nodes_live",
			Help: "Live nodes of this node's group (the serve processes on this Redis and this remote), itself included, at its last heartbeat.",
		}),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "echostore_archived_streams_owned",
			Help: "Archived streams this node knows and cycles (its share of the group's) at its last beat.",
		}),
		elsewhere: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "echostore_archived_streams_elsewhere",
			Help: "Archived streams this node knows that another live node of its group cycles, at its last beat.",
		}),
	}
	reg.MustRegister(m.nodesLive, m.owned, m.elsewhere)
	return m
}

// members is a node's heartbeat and its latest view of its group.
type members struct {
	s    *Server
	id   string
	info string // the heartbeat's value

	mu    sync.Mutex
	group string // the remote's identity, "" until read
	cur   *view  // nil until the first heartbeat
	gen   uint64 // how often the live nodes changed (view.gen)
	gone  bool   // left: heartbeats no more
	// failing: the last heartbeat failed (logged once until one succeeds).
	failing bool
	clash   map[string]bool // nodes logged for sharing this node's number
}

// newMembers returns the membership of the server's node.
func newMembers(s *Server) *members {
	id := s.nodeID
	info, _ := json.Marshal(nodeInfo{s.Addr().String(), s.cfg.Node, time.Now().UTC().Format(time.RFC3339)})
	return &members{s: s, id: id, info: string(info), clash: map[string]bool{}}
}

// checkNodeNumbers logs, once per node, another live node of the group with
// this node's node number: their accept volumes (accept.Q.N) have one name
// in the remote, so the two would write one volume and fence each other's
// pushes (sync enqueues failing).
func (m *members) checkNodeNumbers(ctx context.Context, v *view) {
	var keys, ids []string
	for _, id := range v.nodes {
		if id != v.self {
			keys, ids = append(keys, NodeKey(v.group, id)), append(ids, id)
		}
	}
	if len(keys) == 0 {
		return
	}
	vals, err := m.s.mq.Run(ctx, scriptNodeInfos, keys, nil).Strings()
	if err != nil || len(vals) != len(keys) {
		return // checked again at the next change
	}
	for i, raw := range vals {
		var in nodeInfo
		if raw == "" || json.Unmarshal([]byte(raw), &in) != nil || in.Node != m.s.cfg.Node {
			continue
		}
		m.mu.Lock()
		first := !m.clash[ids[i]]
		m.clash[ids[i]] = true
		m.mu.Unlock()
		if first {
			m.s.log.Error("serve: another live node of the group has this node's node number: their accept volumes have one name in the remote and fence each other's pushes; give each node its own node number (node: in the configuration, ECHOSTORE_NODE)",
				"node", m.s.cfg.Node, "other", ids[i], "other_addr", in.Addr)
		}
	}
}

// NodeID returns the node's id (NodeIDFile of its data dir).
func (s *Server) NodeID() string { return s.nodeID }

// ShareOf returns which of the nodes (ids) cycles the archived stream ref
// when they are its group's live nodes: the one rendezvous hashing picks,
// as every node computes it ("" for no nodes).
func ShareOf(nodes []string, ref names.StreamRef) string {
	return (&view{nodes: nodes}).owner(ref)
}

// refresh heartbeats and reads the group: it returns the new view and
// whether it differs from the last (other nodes, or another epoch). With
// no group yet (the remote's identity not read: the remote unavailable),
// it returns nil.
func (m *members) refresh(ctx context.Context) (*view, bool, error) {
	m.mu.Lock()
	g, gone := m.group, m.gone
	m.mu.Unlock()
	if gone {
		return nil, false, nil
	}
	if g == "" {
		rid, err := m.s.store.RemoteIdentity(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("serve: membership: the remote's identity: %w", err)
		}
		g = rid.String()
		m.mu.Lock()
		m.group = g
		m.mu.Unlock()
	}
	reply, err := m.s.mq.Run(ctx, scriptHeartbeat, []string{NodesKey(g), NodeKey(g, m.id), StreamsEpochKey(g)},
		[]string{strconv.FormatInt(HeartbeatTTL.Milliseconds(), 10), m.id, m.info}).Strings()
	if err != nil {
		return nil, false, fmt.Errorf("serve: heartbeat: %w", err)
	}
	if len(reply)%2 != 1 {
		return nil, false, fmt.Errorf("serve: heartbeat: unexpected reply %q", reply)
	}
	v := &view{group: g, self: m.id, epoch: reply[0], left: map[string]int64{}}
	for i := 1; i < len(reply); i += 2 {
		v.nodes = append(v.nodes, reply[i])
		v.left[reply[i]], _ = strconv.ParseInt(reply[i+1], 10, 64)
	}
	if !slices.Contains(v.nodes, m.id) {
		v.nodes = append(v.nodes, m.id) // it has just heartbeated
		v.left[m.id] = HeartbeatTTL.Milliseconds()
	}
	slices.Sort(v.nodes)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return nil, false, nil
	}
	changed := m.cur == nil || m.cur.epoch != v.epoch || !slices.Equal(m.cur.nodes, v.nodes)
	if m.cur != nil && !slices.Equal(m.cur.nodes, v.nodes) {
		m.gen++
		m.s.log.Info("serve: the group's nodes changed; the archived streams are shared again",
			"group", g, "node", m.id, "nodes", len(v.nodes), "before", len(m.cur.nodes))
	}
	v.gen = m.gen
	m.cur = v
	m.s.fm.nodesLive.Set(float64(len(v.nodes)))
	return v, changed, nil
}

// view returns the latest view, nil if there is none.
func (m *members) view() *view {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return nil
	}
	return m.cur
}

// streamMet moves the group's streams epoch: the others discover the
// archived streams on their next beat.
func (m *members) streamMet(ctx context.Context) error {
	m.mu.Lock()
	g := m.group
	m.mu.Unlock()
	if g == "" {
		return nil
	}
	if err := m.s.mq.Run(ctx, scriptStreamMet, []string{StreamsEpochKey(g)},
		[]string{strconv.FormatInt(HeartbeatTTL.Milliseconds(), 10)}).Err(); err != nil {
		return fmt.Errorf("serve: announce a stream to the group: %w", err)
	}
	return nil
}

// leave takes the node out of its group at once (a clean shutdown), so the
// others take its streams over on their next beat instead of after
// HeartbeatTTL.
func (m *members) leave(ctx context.Context) {
	m.mu.Lock()
	g := m.group
	m.gone = true
	m.mu.Unlock()
	if g == "" {
		return
	}
	if err := m.s.mq.Run(ctx, scriptLeave, []string{NodesKey(g), NodeKey(g, m.id)}, []string{m.id}).Err(); err != nil {
		m.s.log.Warn("serve: leave the group; the others take over when the heartbeat expires", "err", err)
	}
}

// loop heartbeats every HeartbeatEvery until ctx ends.
func (m *members) loop(ctx context.Context) {
	every(ctx, HeartbeatEvery, func() { m.heartbeat(ctx) })
}

// heartbeat refreshes the view (the heartbeat loop's and each beat's), and
// makes the next discovery due at once when the view changed. A failure is
// logged when the heartbeats start failing and when they succeed again;
// meanwhile the last view stands (none: the node cycles every stream it
// knows).
func (m *members) heartbeat(ctx context.Context) {
	v, changed, err := m.refresh(ctx)
	if changed && v != nil {
		m.checkNodeNumbers(ctx, v)
	}
	m.mu.Lock()
	was := m.failing
	m.failing = err != nil
	m.mu.Unlock()
	switch {
	case err != nil && !was && ctx.Err() == nil:
		m.s.log.Warn("serve: heartbeat failed; the last view of the group stands, retried every second", "err", err)
	case err == nil && was:
		m.s.log.Info("serve: heartbeats again", "group", m.view().groupName())
	}
	if changed {
		m.s.disc.force()
	}
}

// owns reports whether this node cycles ref: with no view (the server is
// not running, or its remote's identity is not read yet) it cycles every
// stream it knows, as a node alone does.
func (s *Server) owns(ref names.StreamRef) bool {
	m := s.fleet()
	if m == nil {
		return true
	}
	v := m.view()
	return v == nil || v.owner(ref) == v.self
}

// cycles reports whether the beat cycles ref here: ref is this node's
// share (owns), or the data dir holds commits of ref's archive volume that
// the remote lacks (trim_after: local, or a push that failed), which no
// other node could cycle without: the node keeps cycling the stream until
// they are pushed (a trim_after remote cycle pushes them) and leaves it to
// its owner then. The lease keeps the two from cycling it at once; the
// owner's cycle is refused meanwhile as behind the seam cache.
func (s *Server) cycles(ctx context.Context, ref names.StreamRef) bool {
	if s.owns(ref) {
		return true
	}
	vol, err := s.archiveVolume(ctx, ref)
	if err != nil || vol == nil {
		return false
	}
	in := vol.Info()
	return in.LocalLSN > in.SyncLSN
}

// fleet returns the node's membership, nil unless Run runs.
func (s *Server) fleet() *members {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members
}

// groupName is the view's group, "" for no view.
func (v *view) groupName() string {
	if v == nil {
		return ""
	}
	return v.group
}

// countShare sets the gauges of the archived streams this node cycles and
// of those it leaves to another node.
func (s *Server) countShare() {
	s.mu.Lock()
	refs := make([]names.StreamRef, 0, len(s.streams))
	for k, st := range s.streams {
		if st.archived {
			refs = append(refs, k)
		}
	}
	s.mu.Unlock()
	owned := 0
	for _, k := range refs {
		if s.owns(k) {
			owned++
		}
	}
	s.fm.owned.Set(float64(owned))
	s.fm.elsewhere.Set(float64(len(refs) - owned))
}

// announce registers ref, an archived stream met through the API whose
// first records were just appended, as archived in Redis and moves the
// group's streams epoch, so that the node whose share it is (maybe another)
// discovers it on its next beat, before any cycle has registered it. A
// failure is retried by the next beats.
func (s *Server) announce(ctx context.Context, ref names.StreamRef) {
	err := archive.RegisterArchived(ctx, s.mq, ref)
	if m := s.fleet(); err == nil && m != nil {
		err = m.streamMet(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.unannounced[ref] = true
		s.log.Warn("serve: a new archived stream not announced to the group; retried at the next beat", ref.LogAttr(), "err", err)
		return
	}
	delete(s.unannounced, ref)
}

// announceAgain retries the announcements that failed.
func (s *Server) announceAgain(ctx context.Context) {
	s.mu.Lock()
	var refs []names.StreamRef
	for k := range s.unannounced {
		if st, ok := s.streams[k]; ok && st.archived {
			refs = append(refs, k)
		} else {
			delete(s.unannounced, k) // deleted since, or declared unarchived
		}
	}
	s.mu.Unlock()
	for _, k := range refs {
		s.announce(ctx, k)
	}
}
