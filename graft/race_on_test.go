//go:build race

package graft

// raceEnabled: this test binary has the race detector, under which Pebble
// also turns on its invariant checks (a stack trace per file reference), so
// the sequential property tests run fewer cases to fit CI's time budget.
const raceEnabled = true
