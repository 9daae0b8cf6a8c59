package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/server"
)

// TestServeConfigKeys: every key of serve's configuration file lands in
// its server.Config field, and every field of server.Config has a key but
// those a file must not give.
func TestServeConfigKeys(t *testing.T) {
	c, err := parseServeConfig([]byte(`
listen: 127.0.0.1:9999
resp: 127.0.0.1:6390
token: 0123456789abcdef
tokens:
  - {name: dash, scopes: [read], file: /run/secrets/dash}
allowed_hosts: [echostore.internal]
metrics_public: true
faults: true
redis: redis://r:6379/0
data: /var/lib/echostore
remote: s3://bucket/prefix
remote_key_file: /etc/echostore/remote.key
remote_old_key_files: [/etc/echostore/old.key]
dev: true
node: 3
restore: true
beat: 2s
sweep: 1m
replicate_every: -1s
defaults: {archived: false, keep: 50, max_age: 1h, trim_after: remote, retain_count: 9, retain_age: 720h, max_live: 7, max_hold: 30m, stalled_groups: archive}
queues:
  - name: orders
    streams:
      - {name: events, keep: 100}
      - {name: audit}
streams:
  - {key: "app/eu:orders", archived: true}
cache_size: 1GiB
history: 24h
job_outcomes: outcomes
max_body: 1024
body_timeout: 5s
checkpoint_every: 10ms
sample_every: 3s
max_streams: 20
max_queues: 30
discover: false
gc_every: 30s
gc_grace: 2h
`))
	if err != nil {
		t.Fatal(err)
	}
	no, yes := false, true
	want := server.Config{
		Listen:            "127.0.0.1:9999",
		RESP:              "127.0.0.1:6390",
		Token:             "0123456789abcdef",
		Tokens:            []server.TokenConfig{{Name: "dash", Scopes: []string{"read"}, File: "/run/secrets/dash"}},
		AllowedHosts:      []string{"echostore.internal"},
		MetricsPublic:     true,
		Faults:            true,
		Redis:             "redis://r:6379/0",
		Data:              "/var/lib/echostore",
		Remote:            "s3://bucket/prefix",
		RemoteKeyFile:     "/etc/echostore/remote.key",
		RemoteOldKeyFiles: []string{"/etc/echostore/old.key"},
		Dev:               true,
		Node:              3,
		Restore:           true,
		Beat:              2 * time.Second,
		Sweep:             time.Minute,
		ReplicateEvery:    -time.Second,
		Defaults: server.StreamConfig{Archived: &no, Keep: 50, MaxAge: time.Hour, TrimAfter: "remote", RetainCount: 9,
			RetainAge: 720 * time.Hour, MaxLive: 7, MaxHold: 30 * time.Minute, StalledGroups: "archive"},
		Queues:          []server.QueueConfig{{Name: "orders", Streams: []server.StreamConfig{{Name: "events", Keep: 100}, {Name: "audit"}}}},
		Streams:         []server.StreamConfig{{Key: "app/eu:orders", Archived: &yes}},
		CacheSize:       1 << 30,
		History:         24 * time.Hour,
		JobOutcomes:     "outcomes",
		MaxBody:         1024,
		BodyTimeout:     5 * time.Second,
		CheckpointEvery: 10 * time.Millisecond,
		SampleEvery:     3 * time.Second,
		MaxStreams:      20,
		MaxQueues:       30,
		Discover:        &no,
		GCEvery:         30 * time.Second,
		GCGrace:         2 * time.Hour,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", c, want)
	}
	// The file's layout follows server.Config: a field it lacks is one a
	// file must not give.
	noKey := map[string]bool{"RemoteKey": true, "AllowEviction": true, "Logger": true}
	for _, p := range []struct {
		code, file reflect.Type
		noKey      map[string]bool
	}{
		{reflect.TypeFor[server.Config](), reflect.TypeFor[serveConfig](), noKey},
		{reflect.TypeFor[server.QueueConfig](), reflect.TypeFor[queueConfig](), nil},
		{reflect.TypeFor[server.TokenConfig](), reflect.TypeFor[tokenConfig](), map[string]bool{"Value": true}},
	} {
		for i := range p.code.NumField() {
			f := p.code.Field(i)
			if _, ok := p.file.FieldByName(f.Name); f.IsExported() && !ok && !p.noKey[f.Name] {
				t.Errorf("%v.%s has no key in the configuration file (%v)", p.code, f.Name, p.file)
			}
		}
	}
	// A name that reads as a number is still a name.
	if c, err := parseServeConfig([]byte("queues: [{name: 1.5, streams: [{name: 2.5}]}]\nstreams: [{key: 3.5}]")); err != nil ||
		c.Queues[0].Name != "1.5" || c.Queues[0].Streams[0].Name != "2.5" || c.Streams[0].Key != "3.5" {
		t.Fatalf("numeric names: %+v %+v %v", c.Queues, c.Streams, err)
	}
	// An empty file is the zero Config: every default.
	if c, err := parseServeConfig(nil); err != nil || !reflect.DeepEqual(c, server.Config{}) {
		t.Fatalf("empty file: %+v %v", c, err)
	}
}

// TestServeConfigRefused: what the file's decoding refuses (an unknown
// key, a fraction, a size that does not parse), and what server checks
// once the file is decoded (out of range values), are ErrConfig naming
// the key, the value or the line.
func TestServeConfigRefused(t *testing.T) {
	for yml, msg := range map[string]string{
		"unknown: 1":                    "line 1: field unknown not found",
		"queues: [{name: a, keeep: 1}]": "field keeep not found",
		"defaults: {keeep: 1}":          "field keeep not found",
		"streams: [{key: k, keeep: 1}]": "field keeep not found",
		"beat: 5":                       "line 1: cannot unmarshal",
		"beat: soon":                    "cannot unmarshal",
		"[1, 2]":                        "cannot unmarshal",
		"listen: [":                     "yaml",
		"tokens: [{name: a, scopes: [read], value: x}]": "field value not found",
		// A fraction is refused, not truncated (keep: 1.9 would keep 1).
		"queues: [{name: a, streams: [{name: s, keep: 1.9}]}]": "1.9 is not a whole number",
		"max_streams: 2.5":                       "line 1: 2.5 is not a whole number",
		"node: 1.5":                              "not a whole number",
		"defaults: {retain_count: 1e3}":          "not a whole number",
		"beat: 2s\ncache_size: 1GB\n":            `invalid serve configuration: line 2: size "1GB": not a whole number`,
		"cache_size: 1gib\n":                     `size "1gib"`,
		"cache_size: 1.5GiB\n":                   `size "1.5GiB"`,
		"cache_size: 1.5\n":                      "not a whole number",
		"cache_size: -1GiB\n":                    "negative",
		"cache_size: GiB\n":                      "no number",
		"cache_size: 9999999TiB\n":               "too large",
		"cache_size: [1]\n":                      "line 1: want a size",
		"cache_size: \"99999999999999999999\"\n": "too large",
	} {
		_, err := parseServeConfig([]byte(yml))
		if !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want ErrConfig saying %q", yml, err, msg)
		}
		if err != nil && strings.Count(err.Error(), server.ErrConfig.Error()) != 1 {
			t.Errorf("%q: %v: says %q more than once", yml, err, server.ErrConfig.Error())
		}
	}
	// Decoded, then refused by server's checks (the messages are server's).
	for yml, msg := range map[string]string{
		"queues: [{name: 'a:b'}]":                                      "queue",
		"queues: [{name: a, streams: [{name: s, trim_after: later}]}]": "later",
		"queues: [{name: a, streams: [{name: s}, {name: s}]}]":         "declared twice",
		"queues: [{name: a, streams: [{name: s, keep: -1}]}]":          "negative keep",
		"max_streams: -1": "max_streams -1",
		"max_queues: -1":  "max_queues -1",
		"max_streams: 1\nqueues: [{name: a, streams: [{name: s}, {name: t}]}]": "more than max_streams",
		"gc_grace: -1s":        "gc_grace -1s",
		"cache_size: 64MiB\n":  "cache_size 64MiB: want at least 128MiB",
		"cache_size: 1\n":      "want at least 128MiB",
		"streams: [{name: s}]": "a top-level stream is named by its key",
		"queues: [{name: a, streams: [{name: s, archived: false, retain_count: 3}]}]":    "retain",
		"defaults: {stalled_groups: drop}":                                               "drop",
		"queues: [{name: a.b, streams: [{name: c}]}, {name: a, streams: [{name: b.c}]}]": "archive.a.b.c",
	} {
		c, err := parseServeConfig([]byte(yml))
		if err != nil {
			t.Errorf("%q: %v, want it decoded", yml, err)
			continue
		}
		c.Data, c.Redis = t.TempDir(), "redis://127.0.0.1:1/0"
		if _, err := c.Checked(); !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want ErrConfig saying %q", yml, err, msg)
		}
	}
}

// TestTokenInConfigFile: a configuration file that holds a token is
// refused while every user can read it, and read once it is private.
func TestTokenInConfigFile(t *testing.T) {
	const token = "a-token-of-enough-bytes"
	p := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(p, []byte("token: "+token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chmod := func(mode os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	chmod(0o644)
	if _, err := loadServeConfig(p); !errors.Is(err, server.ErrConfig) || !strings.Contains(err.Error(), "chmod o-r") || strings.Contains(err.Error(), token) {
		t.Fatalf("a world-readable configuration with a token: %v", err)
	}
	chmod(0o640)
	if c, err := loadServeConfig(p); err != nil || c.Token != token {
		t.Fatalf("a private configuration with a token: %v", err)
	}
	if err := os.WriteFile(p, []byte("beat: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chmod(0o644)
	if _, err := loadServeConfig(p); err != nil {
		t.Fatalf("a world-readable configuration without a token: %v", err)
	}
	if _, err := loadServeConfig(filepath.Join(t.TempDir(), "none.yaml")); !errors.Is(err, server.ErrConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v, want ErrConfig and os.ErrNotExist", err)
	}
}

// TestServeConfigDocs: every YAML example of the documentation decodes
// and passes server's checks (the token files it names are the reader's,
// so they are left out of the check).
func TestServeConfigDocs(t *testing.T) {
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	n := 0
	for _, doc := range []string{"SERVE.md", "BRING-YOUR-OWN-STREAMS.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatch(b, -1) {
			n++
			c, err := parseServeConfig(m[1])
			if err != nil {
				t.Errorf("docs/%s:\n%s: %v", doc, m[1], err)
				continue
			}
			c.Data, c.Redis, c.Tokens = t.TempDir(), "redis://127.0.0.1:1/0", nil
			if _, err := c.Checked(); err != nil {
				t.Errorf("docs/%s:\n%s: %v", doc, m[1], err)
			}
		}
	}
	if n < 3 {
		t.Fatalf("%d YAML examples in the docs, want at least 3", n)
	}
}
