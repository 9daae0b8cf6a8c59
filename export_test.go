package echostore

import (
	"context"

	"github.com/echostore/echostore/graft"
	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/mq"
)

// Live returns the node's Redis client, for tests that read or write below
// the node.
func (n *Node) Live() *mq.Client { return n.mq }

// Store returns the node's graft store, for tests that make or read
// volumes below the node.
func (n *Node) Store() *graft.Store { return n.store }

// Remote returns the node's remote store, for tests that read its objects.
func (n *Node) Remote() remote.Store { return n.rs }

// What the tests of the group reach inside a node: joining without Run,
// one heartbeat, the node-number check and leaving, so that a test can
// stop a node's heartbeats as a kill would.

// LoadNodeID and ParseNodeID are loadNodeID and parseNodeID.
var (
	LoadNodeID  = loadNodeID
	ParseNodeID = parseNodeID
)

// JoinGroup makes n a member of its group as Run does, with no heartbeat.
func (n *Node) JoinGroup(addr string) {
	n.join(GroupMember{Addr: addr, Node: n.cfg.NodeNumber, Started: startedNow()}, nil)
}

// RefreshGroup is one heartbeat.
func (n *Node) RefreshGroup(ctx context.Context) (*GroupView, bool, error) { return n.refresh(ctx) }

// ClashesWith runs the node-number check over v and returns the nodes it
// found with n's number.
func (n *Node) ClashesWith(ctx context.Context, v *GroupView) map[string]bool {
	n.checkNodeNumbers(ctx, v)
	n.group.mu.Lock()
	defer n.group.mu.Unlock()
	out := map[string]bool{}
	for id := range n.group.clash {
		out[id] = true
	}
	return out
}

// LeaveGroup is leave.
func (n *Node) LeaveGroup(ctx context.Context) { n.leave(ctx) }
