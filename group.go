package echostore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/archive"
	"github.com/echostore/echostore/durable"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/names"
)

// The nodes of a group share its archived streams. A group is the running
// nodes (Run) on one Redis whose remotes have one identity (graft's
// identity object: the same bucket and prefix, whatever URL names it).
// Each node heartbeats in Redis; each archived stream is cycled by the
// live node of the group that rendezvous hashing picks for it (the highest
// hash of the node's id and the stream), so that a node cycles its share
// and does not contend for the leases of the others'; when a node joins or
// leaves, only the streams whose pick changes move. The stream's lease
// stays the fence: a cycle holds it, so two nodes that disagree for a
// moment about the membership never cycle one stream at once
// (docs/SERVE.md, "Several nodes").

// HeartbeatTTL is how long a node's heartbeat lives in Redis: a node that
// stops heartbeating (killed, cut off) is out of its group this long after
// its last heartbeat. It equals the archive lease's TTL, so that a dead
// node's streams are taken over within the lease TTL and one beat.
const HeartbeatTTL = archive.DefaultLeaseTTL

// HeartbeatEvery is how often a running node heartbeats, beside the beat
// (whose cycles may take longer than the TTL).
const HeartbeatEvery = HeartbeatTTL / 5

// ErrNodeID: the data dir's NodeIDFile is not a node id.
var ErrNodeID = errors.New("echostore: the data dir's node-id file is not a node id")

// nodeTag is the hashtag of the group keys: echostore's namespace's own
// slot on a Cluster (no queue's keys are named like them).
const nodeTag = "emq"

// NodesKey is the sorted set of the live nodes of group g: member = node
// id, score = when its heartbeat expires (Redis server time, Unix ms).
func NodesKey(g string) string { return "emq:{" + nodeTag + "}:nodes:" + g }

// NodeKey is the heartbeat of node id of group g: a string (JSON:
// GroupMember's addr, node, started) with the heartbeat's TTL.
func NodeKey(g, id string) string { return "emq:{" + nodeTag + "}:node:" + g + ":" + id }

// StreamsEpochKey is group g's counter of archived streams met: a node
// INCRs it when it meets an archived stream (Announce), and the others
// discover the archived streams again when it moves.
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

// GroupMember is what a node's heartbeat says of it.
type GroupMember struct {
	ID      string `json:"-"`
	Addr    string `json:"addr"`    // RunOptions.Addr: where it answers
	Node    int    `json:"node"`    // its node number (Config.NodeNumber)
	Started string `json:"started"` // when its Run began (RFC 3339, UTC)
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
		return "", fmt.Errorf("echostore: node id: %w", err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("echostore: node id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := durable.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("echostore: write the node id: %w", err)
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

// ID returns the node's id: its data dir's NodeIDFile, written by the
// first Open of the data dir and kept for its life, so that a restarted
// node is the same node to the others ("" for a live-only node).
func (n *Node) ID() string { return n.id }

// Group returns the node's latest view of its group: nil unless Run runs
// with a group (RunOptions.Alone false) and a heartbeat has read it.
func (n *Node) Group() *GroupView {
	g := &n.group
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.joined {
		return nil
	}
	return g.cur
}

// Owns reports whether ref is this node's share of its group: with no view
// (Run does not run, it runs alone, or the remote's identity is not read
// yet) the node cycles every stream it knows, as a node alone does.
func (n *Node) Owns(ref names.StreamRef) bool {
	v := n.Group()
	return v == nil || v.Owner(ref) == v.Self
}

// Cycles reports whether a beat cycles ref here: ref is this node's share
// (Owns), or the data dir holds commits of ref's archive volume that the
// remote lacks (trim_after local, or a push that failed), which no other
// node could cycle without: the node keeps cycling the stream until they
// are pushed (a trim_after remote cycle pushes them) and leaves it to its
// owner then. The lease keeps the two from cycling it at once; the owner's
// cycle is refused meanwhile as behind the seam cache.
func (n *Node) Cycles(ctx context.Context, ref names.StreamRef) bool {
	if n.Owns(ref) {
		return true
	}
	if n.store == nil {
		return false
	}
	vol, err := n.archiveVolume(ctx, ref)
	if err != nil || vol == nil {
		return false
	}
	in := vol.Info()
	return in.LocalLSN > in.SyncLSN
}

// GroupMembers reads the heartbeat of each node of v (one Redis round
// trip), in v.Nodes' order; a node whose heartbeat expired has its ID
// alone.
func (n *Node) GroupMembers(ctx context.Context, v *GroupView) ([]GroupMember, error) {
	live, err := n.live()
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(v.Nodes))
	for i, id := range v.Nodes {
		keys[i] = NodeKey(v.Group, id)
	}
	vals, err := live.Run(ctx, scriptNodeInfos, keys, nil).Strings()
	if err != nil {
		return nil, fmt.Errorf("echostore: read the group's heartbeats: %w", err)
	}
	if len(vals) != len(keys) {
		return nil, fmt.Errorf("echostore: read the group's heartbeats: %d replies for %d nodes", len(vals), len(keys))
	}
	out := make([]GroupMember, len(keys))
	for i, raw := range vals {
		if raw != "" {
			_ = json.Unmarshal([]byte(raw), &out[i]) // a foreign value reads as blank
		}
		out[i].ID = v.Nodes[i]
	}
	return out, nil
}

// Announce registers ref, an archived stream met outside the beat (its
// first records appended through the node), as archived in Redis and
// moves the group's streams epoch, so that the node whose share it is
// (maybe another) discovers it on its next beat, before any cycle has
// registered it.
func (n *Node) Announce(ctx context.Context, ref names.StreamRef) error {
	live, err := n.live()
	if err != nil {
		return err
	}
	if err := archive.RegisterArchived(ctx, live, ref); err != nil {
		return fmt.Errorf("echostore: announce %s: %w", ref, err)
	}
	g := &n.group
	g.mu.Lock()
	name, joined := g.name, g.joined
	g.mu.Unlock()
	if name == "" || !joined {
		return nil
	}
	if err := live.Run(ctx, scriptStreamMet, []string{StreamsEpochKey(name)},
		[]string{strconv.FormatInt(HeartbeatTTL.Milliseconds(), 10)}).Err(); err != nil {
		return fmt.Errorf("echostore: announce %s to the group: %w", ref, err)
	}
	return nil
}

// join makes the node a member of its group (Run): its heartbeats say m.
func (n *Node) join(m GroupMember, onView func(*GroupView, bool)) {
	info, _ := json.Marshal(m) // a struct of strings and an int
	g := &n.group
	g.mu.Lock()
	defer g.mu.Unlock()
	g.joined, g.info, g.onView = true, string(info), onView
	if g.clash == nil {
		g.clash = map[string]bool{}
	}
}

// refresh heartbeats and reads the group: it returns the new view and
// whether it differs from the last (other nodes, or another epoch). Not
// joined, it returns nil.
func (n *Node) refresh(ctx context.Context) (*GroupView, bool, error) {
	g := &n.group
	g.hb.Lock()
	defer g.hb.Unlock()
	g.mu.Lock()
	name, joined, info := g.name, g.joined, g.info
	g.mu.Unlock()
	if !joined {
		return nil, false, nil
	}
	live, err := n.live()
	if err != nil {
		return nil, false, err
	}
	if name == "" {
		rid, err := n.store.RemoteIdentity(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("echostore: membership: the remote's identity: %w", err)
		}
		name = rid.String()
		g.mu.Lock()
		g.name = name
		g.mu.Unlock()
	}
	reply, err := live.Run(ctx, scriptHeartbeat, []string{NodesKey(name), NodeKey(name, n.id), StreamsEpochKey(name)},
		[]string{strconv.FormatInt(HeartbeatTTL.Milliseconds(), 10), n.id, info}).Strings()
	if err != nil {
		return nil, false, fmt.Errorf("echostore: heartbeat: %w", err)
	}
	if len(reply)%2 != 1 {
		return nil, false, fmt.Errorf("echostore: heartbeat: unexpected reply %q", reply)
	}
	v := &GroupView{Group: name, Self: n.id, Epoch: reply[0], Left: map[string]int64{}}
	for i := 1; i < len(reply); i += 2 {
		v.Nodes = append(v.Nodes, reply[i])
		v.Left[reply[i]], _ = strconv.ParseInt(reply[i+1], 10, 64)
	}
	if !slices.Contains(v.Nodes, n.id) {
		v.Nodes = append(v.Nodes, n.id) // it has just heartbeated
		v.Left[n.id] = HeartbeatTTL.Milliseconds()
	}
	slices.Sort(v.Nodes)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.joined {
		return nil, false, nil
	}
	changed := g.cur == nil || g.cur.Epoch != v.Epoch || !slices.Equal(g.cur.Nodes, v.Nodes)
	if g.cur != nil && !slices.Equal(g.cur.Nodes, v.Nodes) {
		g.gen++
		n.log.Info("echostore: the group's nodes changed; the archived streams are shared again",
			"group", name, "node", n.id, "nodes", len(v.Nodes), "before", len(g.cur.Nodes))
	}
	v.Gen = g.gen
	g.cur = v
	return v, changed, nil
}

// Heartbeat refreshes the node's view of its group now and returns it: Run
// heartbeats every HeartbeatEvery and before each beat; a caller that
// runs a beat by hand (Beat) heartbeats first for a fresh view. It checks
// the node numbers when the view changed and reports it to
// RunOptions.OnGroup. A failure is logged when the heartbeats start
// failing and when they succeed again; meanwhile the last view stands
// (none: the node cycles every stream it knows). A node that is not in a
// group (Run does not run, or runs Alone) returns nil.
func (n *Node) Heartbeat(ctx context.Context) *GroupView {
	v, changed, err := n.refresh(ctx)
	if changed && v != nil {
		n.checkNodeNumbers(ctx, v)
		n.disc.force() // the shares moved, or a node met a new archived stream
	}
	g := &n.group
	g.mu.Lock()
	was := g.failing
	g.failing = err != nil
	onView := g.onView
	g.mu.Unlock()
	switch {
	case err != nil && !was && ctx.Err() == nil:
		n.log.Warn("echostore: heartbeat failed; the last view of the group stands, retried every second", "err", err)
	case err == nil && was && v != nil:
		n.log.Info("echostore: heartbeats again", "group", v.Group)
	}
	if v != nil && onView != nil {
		onView(v, changed)
	}
	return n.Group()
}

// checkNodeNumbers logs, once per node, another live node of the group with
// this node's node number: their accept volumes (accept.Q.N) have one name
// in the remote, so the two would write one volume and fence each other's
// pushes (sync enqueues failing).
func (n *Node) checkNodeNumbers(ctx context.Context, v *GroupView) {
	others := &GroupView{Group: v.Group}
	for _, id := range v.Nodes {
		if id != v.Self {
			others.Nodes = append(others.Nodes, id)
		}
	}
	if len(others.Nodes) == 0 {
		return
	}
	ms, err := n.GroupMembers(ctx, others)
	if err != nil {
		return // checked again at the next change
	}
	g := &n.group
	for _, m := range ms {
		if m.Addr == "" && m.Started == "" || m.Node != n.cfg.NodeNumber {
			continue
		}
		g.mu.Lock()
		first := !g.clash[m.ID]
		g.clash[m.ID] = true
		g.mu.Unlock()
		if first {
			n.log.Error("echostore: another live node of the group has this node's node number: their accept volumes have one name in the remote and fence each other's pushes; give each node its own node number (node: in the configuration, ECHOSTORE_NODE)",
				"node", n.cfg.NodeNumber, "other", m.ID, "other_addr", m.Addr)
		}
	}
}

// leave takes the node out of its group at once (the end of Run, Close),
// so the others take its streams over on their next beat instead of after
// HeartbeatTTL. It waits for a heartbeat in flight.
func (n *Node) leave(ctx context.Context) {
	g := &n.group
	g.hb.Lock()
	defer g.hb.Unlock()
	g.mu.Lock()
	name, joined := g.name, g.joined
	g.joined, g.cur, g.failing = false, nil, false
	g.mu.Unlock()
	if name == "" || !joined {
		return
	}
	if err := n.mq.Run(ctx, scriptLeave, []string{NodesKey(name), NodeKey(name, n.id)}, []string{n.id}).Err(); err != nil {
		n.log.Warn("echostore: leave the group; the others take over when the heartbeat expires", "err", err)
	}
}

// startedNow is a GroupMember's Started for a Run beginning now.
func startedNow() string { return time.Now().UTC().Format(time.RFC3339) }
