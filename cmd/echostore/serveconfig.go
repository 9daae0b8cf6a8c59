package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/echostore/echostore/server"
)

// serveConfig is the layout of serve's YAML configuration file (--config;
// docs/SERVE.md): every key it may hold, each the field of server.Config
// of the same name (whose comment says what it does). A key the file
// does not name keeps the field's zero value, its default; a key not
// listed here is refused.
type serveConfig struct {
	Listen            string         `yaml:"listen"`
	RESP              string         `yaml:"resp"`
	Token             string         `yaml:"token"`
	Tokens            []tokenConfig  `yaml:"tokens"`
	AllowedHosts      []string       `yaml:"allowed_hosts"`
	MetricsPublic     bool           `yaml:"metrics_public"`
	Faults            bool           `yaml:"faults"`
	Redis             string         `yaml:"redis"`
	Data              string         `yaml:"data"`
	Remote            string         `yaml:"remote"`
	RemoteKeyFile     string         `yaml:"remote_key_file"`
	RemoteOldKeyFiles []string       `yaml:"remote_old_key_files"`
	Dev               bool           `yaml:"dev"`
	Node              int            `yaml:"node"`
	Restore           bool           `yaml:"restore"`
	Beat              time.Duration  `yaml:"beat"`
	Sweep             time.Duration  `yaml:"sweep"`
	ReplicateEvery    time.Duration  `yaml:"replicate_every"`
	Defaults          streamConfig   `yaml:"defaults"`
	Queues            []queueConfig  `yaml:"queues"`
	Streams           []streamConfig `yaml:"streams"`
	CacheSize         sizeConfig     `yaml:"cache_size"`
	History           time.Duration  `yaml:"history"`
	JobOutcomes       string         `yaml:"job_outcomes"`
	MaxBody           int64          `yaml:"max_body"`
	BodyTimeout       time.Duration  `yaml:"body_timeout"`
	CheckpointEvery   time.Duration  `yaml:"checkpoint_every"`
	SampleEvery       time.Duration  `yaml:"sample_every"`
	MaxStreams        int            `yaml:"max_streams"`
	MaxQueues         int            `yaml:"max_queues"`
	Discover          *bool          `yaml:"discover"`
	GCEvery           time.Duration  `yaml:"gc_every"`
	GCGrace           time.Duration  `yaml:"gc_grace"`
}

// streamConfig is a stream of the file (an entry of defaults, a queue's
// streams or the top-level streams): server.StreamConfig field for field,
// in its order, so that one converts to the other.
type streamConfig struct {
	Name          string        `yaml:"name"`
	Key           string        `yaml:"key"`
	Keep          int64         `yaml:"keep"`
	MaxAge        time.Duration `yaml:"max_age"`
	Archived      *bool         `yaml:"archived"`
	TrimAfter     string        `yaml:"trim_after"`
	RetainCount   uint64        `yaml:"retain_count"`
	RetainAge     time.Duration `yaml:"retain_age"`
	MaxLive       int64         `yaml:"max_live"`
	MaxHold       time.Duration `yaml:"max_hold"`
	StalledGroups string        `yaml:"stalled_groups"`
}

// queueConfig is a queue of the file (server.QueueConfig).
type queueConfig struct {
	Name    string         `yaml:"name"`
	Streams []streamConfig `yaml:"streams"`
}

// tokenConfig is a token of the file (server.TokenConfig): its value is
// read from File, never written in the file itself.
type tokenConfig struct {
	Name   string   `yaml:"name"`
	Scopes []string `yaml:"scopes"`
	File   string   `yaml:"file"`
}

// sizeConfig is a size of the file (cache_size): a server.ByteSize whose
// errors name their line.
type sizeConfig server.ByteSize

// UnmarshalYAML parses a scalar as a server.ByteSize.
func (b *sizeConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a size such as 1GiB", n.Line)
	}
	var v server.ByteSize
	if err := v.UnmarshalText([]byte(n.Value)); err != nil {
		// parseServeConfig names ErrConfig once, for every error of the
		// file: not again here.
		return fmt.Errorf("line %d: %s", n.Line, strings.TrimPrefix(err.Error(), server.ErrConfig.Error()+": "))
	}
	*b = sizeConfig(v)
	return nil
}

// loadServeConfig reads serve's YAML configuration file into a
// server.Config (parseServeConfig). A file that holds a token (token:)
// must not be readable by every user. Every error wraps server.ErrConfig.
func loadServeConfig(path string) (server.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return server.Config{}, fmt.Errorf("%w: %w", server.ErrConfig, err)
	}
	c, err := parseServeConfig(b)
	if err != nil {
		return c, err
	}
	if c.Token != "" {
		fi, err := os.Stat(path)
		if err != nil {
			return server.Config{}, fmt.Errorf("%w: %w", server.ErrConfig, err)
		}
		if fi.Mode().Perm()&0o004 != 0 {
			return server.Config{}, fmt.Errorf("%w: %s holds a token (token:) and is readable by every user of the machine (mode %v): chmod o-r %s, or move the token to a file of its own (tokens: [{name, scopes, file}])",
				server.ErrConfig, path, fi.Mode().Perm(), path)
		}
	}
	return c, nil
}

// parseServeConfig decodes serve's YAML configuration into a
// server.Config. Unknown keys are errors, and so is a fraction where a
// whole number goes; every error wraps server.ErrConfig and names the
// line where yaml gives one. The values are checked by server.New
// (Config.Checked), not here.
func parseServeConfig(b []byte) (server.Config, error) {
	// Every number of the configuration is a whole number (counts, a node
	// number) or a duration: a fraction would be truncated silently by the
	// decoder (keep: 1.9 would keep 1), so it is refused first.
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return server.Config{}, fmt.Errorf("%w: %w", server.ErrConfig, err)
	}
	if n := findFloat(&doc); n != nil {
		return server.Config{}, fmt.Errorf("%w: line %d: %s is not a whole number (every number of the configuration is a count or a node number; durations take units, e.g. 1.5s)", server.ErrConfig, n.Line, n.Value)
	}
	var f serveConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return server.Config{}, fmt.Errorf("%w: %w", server.ErrConfig, err)
	}
	return f.config(), nil
}

// findFloat returns the first scalar of n tagged as a float, nil if none,
// except the values of name: and key: (a queue, stream or key may be named
// 1.5 without quotes).
func findFloat(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
		return n
	}
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 1 && (n.Content[i-1].Value == "name" || n.Content[i-1].Value == "key") {
			continue
		}
		if f := findFloat(c); f != nil {
			return f
		}
	}
	return nil
}

// config is the server.Config the file gives.
func (f serveConfig) config() server.Config {
	c := server.Config{
		Listen:            f.Listen,
		RESP:              f.RESP,
		Token:             f.Token,
		AllowedHosts:      f.AllowedHosts,
		MetricsPublic:     f.MetricsPublic,
		Faults:            f.Faults,
		Redis:             f.Redis,
		Data:              f.Data,
		Remote:            f.Remote,
		RemoteKeyFile:     f.RemoteKeyFile,
		RemoteOldKeyFiles: f.RemoteOldKeyFiles,
		Dev:               f.Dev,
		Node:              f.Node,
		Restore:           f.Restore,
		Beat:              f.Beat,
		Sweep:             f.Sweep,
		ReplicateEvery:    f.ReplicateEvery,
		Defaults:          server.StreamConfig(f.Defaults),
		Streams:           streamConfigs(f.Streams),
		CacheSize:         server.ByteSize(f.CacheSize),
		History:           f.History,
		JobOutcomes:       f.JobOutcomes,
		MaxBody:           f.MaxBody,
		BodyTimeout:       f.BodyTimeout,
		CheckpointEvery:   f.CheckpointEvery,
		SampleEvery:       f.SampleEvery,
		MaxStreams:        f.MaxStreams,
		MaxQueues:         f.MaxQueues,
		Discover:          f.Discover,
		GCEvery:           f.GCEvery,
		GCGrace:           f.GCGrace,
	}
	for _, t := range f.Tokens {
		c.Tokens = append(c.Tokens, server.TokenConfig{Name: t.Name, Scopes: t.Scopes, File: t.File})
	}
	for _, q := range f.Queues {
		c.Queues = append(c.Queues, server.QueueConfig{Name: q.Name, Streams: streamConfigs(q.Streams)})
	}
	return c
}

// streamConfigs converts the file's streams, nil for none.
func streamConfigs(in []streamConfig) []server.StreamConfig {
	var out []server.StreamConfig
	for _, s := range in {
		out = append(out, server.StreamConfig(s))
	}
	return out
}
