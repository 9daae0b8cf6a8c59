package server

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/graft"
)

// TestConfigGC: GCEvery and GCGrace default to DefaultGCEvery and
// echostore.DefaultGCGrace, reach the node's config (a negative GCEvery
// turns the background GC off), and a negative GCGrace is refused.
func TestConfigGC(t *testing.T) {
	c, err := checked(Config{GCEvery: 30 * time.Second, GCGrace: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if nc := c.NodeConfig(); nc.GCEvery != 30*time.Second || nc.GCGrace != 2*time.Hour {
		t.Fatalf("node config gc %v/%v, want 30s/2h", nc.GCEvery, nc.GCGrace)
	}
	d, err := Config{Data: "d", Redis: "r"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if nc := d.NodeConfig(); nc.GCEvery != DefaultGCEvery || nc.GCGrace != echostore.DefaultGCGrace {
		t.Fatalf("default gc %v/%v, want %v/%v", nc.GCEvery, nc.GCGrace, DefaultGCEvery, echostore.DefaultGCGrace)
	}
	off, err := Config{Data: "d", Redis: "r", GCEvery: -time.Second}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if nc := off.NodeConfig(); nc.GCEvery != 0 {
		t.Fatalf("gc_every -1s: node GCEvery %v, want 0 (off)", nc.GCEvery)
	}
	if _, err = checked(Config{GCGrace: -time.Second}); !errors.Is(err, ErrConfig) {
		t.Fatalf("gc_grace -1s: %v, want ErrConfig", err)
	}
}

// TestMetricsGC: /metrics carries the remote GC's counters, per kind.
func TestMetricsGC(t *testing.T) {
	e := start(t, Config{})
	_, b := e.do("GET", "/metrics", e.cfg.Token, nil)
	for _, want := range []string{
		`echostore_remote_gc_objects_total{kind="segment"} 0`,
		`echostore_remote_gc_objects_total{kind="commit"} 0`,
		`echostore_remote_gc_bytes_total{kind="marker"} 0`,
		`echostore_remote_gc_passes_total 0`,
		`echostore_remote_gc_errors_total 0`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestServeGCRemoves: with gc_every 10ms and a grace of 1ns, serve's
// background GC checkpoints and collects the pushed archive volume: after
// cycles that fold, push and drop, /metrics counts the commits tombstoned
// below the horizon and their bytes (polled with a deadline: the loop runs
// on its own timer). The records are small, so every fold is inline: no
// segment to delete here (the root package's flat-bucket test has them).
func TestServeGCRemoves(t *testing.T) {
	q := queueName(t)
	e := start(t, Config{GCEvery: 10 * time.Millisecond, GCGrace: time.Nanosecond})
	for r := range 6 {
		appendN(e, q, "s", r*300, 300)
		e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2&retain_count=300&trim_after=remote", "")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, b := e.do("GET", "/metrics", e.cfg.Token, nil)
		com, by := gcMetricValue(string(b), `echostore_remote_gc_objects_total{kind="commit"}`), gcMetricValue(string(b), `echostore_remote_gc_bytes_total{kind="commit"}`)
		if com >= 5 && by > 0 && gcMetricValue(string(b), `echostore_remote_gc_passes_total`) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, GC tombstoned %v commits (%v bytes):\n%s", com, by, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gcMetricValue returns the value of the sample named (with its labels) in a
// Prometheus text exposition, or -1.
func gcMetricValue(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// TestConfigCacheSize: CacheSize defaults to graft's and reaches the
// node's config (and so the graft store, TestCacheSize in the root
// package); a size below graft.MinCacheSize is ErrConfig naming the key
// and the value. ParseByteSize takes a whole number of bytes or of a
// binary unit, and refuses every other spelling with ErrConfig saying why.
func TestConfigCacheSize(t *testing.T) {
	for size, want := range map[ByteSize]int64{0: graft.DefaultCacheSize, 1 << 30: 1 << 30, graft.MinCacheSize: graft.MinCacheSize} {
		c, err := checked(Config{CacheSize: size})
		if err != nil {
			t.Fatalf("%v: %v", size, err)
		}
		if got := c.NodeConfig().CacheSize; got != want {
			t.Errorf("%v: node CacheSize %d, want %d", size, got, want)
		}
	}
	for size, msg := range map[ByteSize]string{64 << 20: "cache_size 64MiB: want at least 128MiB", 1: "want at least 128MiB"} {
		if _, err := checked(Config{CacheSize: size}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%v: %v, want ErrConfig saying %q", size, err, msg)
		}
	}
	for s, want := range map[string]ByteSize{
		"1GiB": 1 << 30, "1536 MiB": 1536 << 20, "134217728": 134217728, "262144KiB": 256 << 20,
		"1TiB": 1 << 40, "134217728B": 134217728, " 2GiB ": 2 << 30, "0": 0,
	} {
		var got ByteSize
		if err := got.UnmarshalText([]byte(s)); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", s, got, err, want)
		}
	}
	for s, msg := range map[string]string{
		"1GB":                  `size "1GB": not a whole number`,
		"1gib":                 `size "1gib"`,
		"1.5GiB":               `size "1.5GiB"`,
		"1.5":                  "not a whole number",
		"-1GiB":                "negative",
		"GiB":                  "no number",
		"":                     "no number",
		"9999999TiB":           "too large",
		"99999999999999999999": "too large",
	} {
		if _, err := ParseByteSize(s); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want ErrConfig saying %q", s, err, msg)
		}
	}
	for b, want := range map[ByteSize]string{1 << 30: "1GiB", 1536 << 20: "1536MiB", 100: "100B", 0: "0B", 1025: "1025B"} {
		if got := b.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(b), got, want)
		}
	}
}
