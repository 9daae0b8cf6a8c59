package main

import (
	"testing"
	"time"
)

// TestParseRunAt: --delay counts from the given now; neither flag is the
// zero time; --delay 0 is at once.
func TestParseRunAt(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if at, err := parseRunAt("", 90*time.Second, true, now); err != nil || !at.Equal(now.Add(90*time.Second)) {
		t.Fatalf("--delay 90s: %v %v", at, err)
	}
	if at, err := parseRunAt("", 0, true, now); err != nil || !at.IsZero() {
		t.Fatalf("--delay 0: %v %v", at, err)
	}
	if at, err := parseRunAt("", 0, false, now); err != nil || !at.IsZero() {
		t.Fatalf("neither: %v %v", at, err)
	}
	if at, err := parseRunAt("2031-05-06T07:08:09.5+02:00", 0, false, now); err != nil || at.UnixMilli() != time.Date(2031, 5, 6, 5, 8, 9, 5e8, time.UTC).UnixMilli() {
		t.Fatalf("--run-at: %v %v", at, err)
	}
}
