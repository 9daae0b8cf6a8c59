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

// TestConfigGC: gc_every and gc_grace parse, default to DefaultGCEvery and
// echostore.DefaultGCGrace, reach the node's config (a negative gc_every
// turns the background GC off), and a negative gc_grace is refused.
func TestConfigGC(t *testing.T) {
	c, err := ParseConfig([]byte("gc_every: 30s\ngc_grace: 2h\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Data, c.Redis = "d", "r"
	if c, err = c.withDefaults(); err != nil {
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
	c, err = ParseConfig([]byte("gc_grace: -1s\n"))
	if err == nil {
		c.Data, c.Redis = "d", "r"
		_, err = c.withDefaults()
	}
	if !errors.Is(err, ErrConfig) {
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

// TestConfigCacheSize: cache_size parses as a whole number of bytes or of
// a binary unit, defaults to graft's, reaches the node's config (and so
// the graft store, TestCacheSize in the root package), and every other
// spelling, or a size below graft.MinCacheSize, is ErrConfig with the key
// and the value in the message.
func TestConfigCacheSize(t *testing.T) {
	check := func(yml string) (Config, error) {
		c, err := ParseConfig([]byte(yml))
		if err != nil {
			return c, err
		}
		c.Data, c.Redis = "d", "r"
		return c.withDefaults()
	}
	for yml, want := range map[string]int64{
		"":                         graft.DefaultCacheSize,
		"cache_size: 1GiB\n":       1 << 30,
		"cache_size: 1536 MiB\n":   1536 << 20,
		"cache_size: 134217728\n":  134217728,
		"cache_size: 262144KiB\n":  256 << 20,
		"cache_size: 1TiB\n":       1 << 40,
		"cache_size: \"2GiB\"\n":   2 << 30,
		"cache_size: 134217728B\n": 134217728,
	} {
		c, err := check(yml)
		if err != nil {
			t.Fatalf("%q: %v", yml, err)
		}
		if got := c.NodeConfig().CacheSize; got != want {
			t.Errorf("%q: node CacheSize %d, want %d", yml, got, want)
		}
	}
	for yml, msg := range map[string]string{
		"cache_size: 64MiB\n":                    "cache_size 64MiB: want at least 128MiB",
		"cache_size: 1\n":                        "want at least 128MiB",
		"cache_size: 1GB\n":                      `size "1GB": not a whole number`,
		"cache_size: 1gib\n":                     `size "1gib"`,
		"cache_size: 1.5GiB\n":                   `size "1.5GiB"`,
		"cache_size: 1.5\n":                      "not a whole number",
		"cache_size: -1GiB\n":                    "negative",
		"cache_size: GiB\n":                      "no number",
		"cache_size: 9999999TiB\n":               "too large",
		"cache_size: [1]\n":                      "want a size",
		"cache_size: \"99999999999999999999\"\n": "too large",
	} {
		_, err := check(yml)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want ErrConfig saying %q", yml, err, msg)
		}
	}
	// UnmarshalText is ParseByteSize, for any text decoder.
	var b ByteSize
	if err := b.UnmarshalText([]byte("1536 MiB")); err != nil || b != 1536<<20 {
		t.Errorf("UnmarshalText(1536 MiB): %v %v", b, err)
	}
	if err := b.UnmarshalText([]byte("1GB")); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `size "1GB"`) {
		t.Errorf("UnmarshalText(1GB): %v, want ErrConfig", err)
	}
	for b, want := range map[ByteSize]string{1 << 30: "1GiB", 1536 << 20: "1536MiB", 100: "100B", 0: "0B", 1025: "1025B"} {
		if got := b.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(b), got, want)
		}
	}
}
