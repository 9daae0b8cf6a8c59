package echostore

import "github.com/echostore/echostore/api"

// The data directory's layout (Config.Data): every name that Open, serve
// and the CLI keep in it, in one place. docs/ARCHITECTURE.md draws it.
const (
	// GraftDir is the graft store (locked while a Node is open).
	GraftDir = "graft"
	// AcceptDir holds the accept tier: its outbox is AcceptDir/OutboxDir.
	AcceptDir = "accept"
	// OutboxDir is the accept outbox's folder inside AcceptDir.
	OutboxDir = "outbox"
	// SocketFile is serve's unix socket (api.SocketName).
	SocketFile = api.SocketName
	// TokenFile is serve's admin token, made on its first start (mode
	// 0600).
	TokenFile = "serve.token"
	// NodeIDFile is the node's id: 32 hex digits (16 random bytes) and a
	// line feed, written on the first serve and kept for the data dir's
	// life, so that a restarted node is the same node to its group.
	NodeIDFile = "node-id"
	// RestoreMarker is written by a restore into a data dir that holds no
	// store before it creates anything else, and removed once every volume
	// is restored: a data dir that holds it is incomplete.
	RestoreMarker = "restore.pending"
)
