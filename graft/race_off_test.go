//go:build !race

package graft

const raceEnabled = false
