package mq

import (
	"context"

	"github.com/redis/rueidis"
)

// Script is a Lua script that another package runs on the live tier with
// Client.Run (package archive keeps its lease, seam and delete scripts this
// way). Its source is the "#!lua" shebang (Redis ≥ 7: Redis checks for OOM
// before a writing script runs, so one that writes runs whole or not at
// all), then the helpers mq's own scripts share, then the body:
//
//	split(id), cmpid(a, b), nextid(id)   stream ids as decimal strings (never
//	                                     Lua numbers, which lose precision
//	                                     above 2^53)
//	field(flat, name)                    a field of a flat name/value reply
//	lastid(key)                          a stream's last-generated-id ("0-0"
//	                                     if the key is missing)
//	cappedtrim(key, minid, pass)         XTRIM MINID capped at every consumer
//	                                     group's oldest pending or undelivered
//	                                     entry but those of the groups in pass
//	                                     (a set: name → true; nil: none), the
//	                                     trim of Client.TrimMinID: replies
//	                                     {"OK", trimmed, minid, capped}
//
// The rules of every script of echostore, which Run relies on: every key the
// script touches carries one queue's hashtag ({Q}, so all of them hash to
// one Cluster slot), and every one is passed in KEYS, never built inside
// the script.
type Script struct {
	src string
	lua *rueidis.Lua
}

// scriptHead is what NewScript puts before a body, after the shebang line.
const scriptHead = luaLib + luaTrim

// NewScript returns the script of body, which may write.
func NewScript(body string) *Script {
	src := "#!lua\n" + scriptHead + body
	return &Script{src: src, lua: rueidis.NewLuaScript(src)}
}

// Source returns the script's full source, as sent to Redis.
func (s *Script) Source() string { return s.src }

// Reply is the reply of one run of a Script.
type Reply struct {
	r   rueidis.RedisResult
	err error // a WRONGTYPE reply as a *WrongTypeError
}

// Err returns the error of the run: a failure to get a reply, or an error
// reply of the server or the script (a WRONGTYPE reply is a
// *WrongTypeError, ErrWrongType).
func (r Reply) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.r.Error()
}

// Strings returns a reply that is an array of strings.
func (r Reply) Strings() ([]string, error) {
	if r.err != nil {
		return nil, r.err
	}
	return r.r.AsStrSlice()
}

// Int returns a reply that is an integer.
func (r Reply) Int() (int64, error) {
	if r.err != nil {
		return 0, r.err
	}
	return r.r.AsInt64()
}

// Run runs script with keys and args (KEYS and ARGV) on the master that
// serves keys: every key must carry the same queue hashtag (see Script).
// The script is sent by its SHA, and whole only when the server does not
// know it yet.
func (c *Client) Run(ctx context.Context, script *Script, keys, args []string) Reply {
	res := script.lua.Exec(ctx, c.rdb, keys, args)
	if err := res.Error(); isWrongType(err) {
		return Reply{r: res, err: c.typeError(ctx, err, keys...)}
	}
	return Reply{r: res}
}
