// Package names validates the names of queues, streams and volumes, and
// derives the volume names that the rest of echostore agrees on.
//
// A name matches [A-Za-z0-9._-]{1,128}. It never contains '{', '}' or ':'
// (braces would break the Redis Cluster hashtag, and a stream named
// "x:archived" would collide with the seam cache of stream x), never '/'
// (no path traversal into the data dir or a bucket) and is never "." or "..".
// A volume name does not start with '.' either: it is a segment of remote
// object keys, where a leading '.' is reserved for temporaries.
//
// A stream may instead be named by its Redis key (Key, KeyRef): any
// non-empty bytes up to MaxKeyLen that do not start with "emq:".
//
// Derived names:
//
//	archive.Q.S       the archive volume of stream S of queue Q
//	archive-key.E     the archive volume of the stream at key K (E: K
//	                  escaped), or archive-keyh.H (H: SHA-256 of K) when
//	                  E is too long (KeyVolumePrefix)
//	accept.Q.N        the accept volume of queue Q on node N
//
// Every function here is pure; bad input gets an error wrapping ErrInvalid
// before anything else happens.
package names
