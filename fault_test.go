package echostore_test

import (
	"errors"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/names"
)

// TestArmFault: an armed fault makes the stream's next cycle, by a beat or
// by Cycle, fold and commit, then fail with ErrInjectedFault before its
// trim, so every record stays live; the cycle after it trims again, and
// Undeclare disarms a fault that was never taken.
func TestArmFault(t *testing.T) {
	ctx := t.Context()
	node := open(t, echostore.Config{Data: t.TempDir(), Redis: redisURL, Remote: "file://" + t.TempDir()})
	ref := streamRef(t, "fault")
	policy := echostore.StreamPolicy{Archived: true, Window: echostore.Window{Keep: 2}}
	if err := node.Declare(ref, policy); err != nil {
		t.Fatal(err)
	}
	beat := func() echostore.CycleReport {
		t.Helper()
		var got []echostore.CycleReport
		node.Beat(ctx, echostore.BeatOptions{OnCycle: func(r echostore.CycleReport) {
			if r.Ref == ref {
				got = append(got, r)
			}
		}})
		if len(got) != 1 {
			t.Fatalf("a beat reported %d cycles of %s, want 1", len(got), ref)
		}
		return got[0]
	}
	live := func() int64 {
		t.Helper()
		st, err := node.Status(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return st.Live
	}

	appendN(t, node, ref, 10)
	if err := node.ArmFault(ref); err != nil {
		t.Fatal(err)
	}
	if got := node.Faults(); len(got) != 1 || got[0] != ref {
		t.Fatalf("Faults() = %v, want [%s]", got, ref)
	}
	r := beat()
	if !errors.Is(r.Err, echostore.ErrInjectedFault) || r.Result.Folded != 8 || r.Result.Trimmed != 0 {
		t.Fatalf("the faulted beat's cycle: folded %d, trimmed %d, err %v; want the 8 beyond the window folded, none trimmed, ErrInjectedFault",
			r.Result.Folded, r.Result.Trimmed, r.Err)
	}
	if n := live(); n != 10 {
		t.Fatalf("%d entries live after the faulted cycle, want all 10", n)
	}
	if got := node.Faults(); len(got) != 0 {
		t.Fatalf("Faults() = %v after the faulted cycle, want none: a fault is one-shot", got)
	}
	if r := beat(); r.Err != nil || r.Result.Trimmed != 8 {
		t.Fatalf("the beat after the fault: trimmed %d, err %v; want 8 trimmed", r.Result.Trimmed, r.Err)
	}

	appendN(t, node, ref, 5)
	if err := node.ArmFault(ref); err != nil {
		t.Fatal(err)
	}
	opts := echostore.CycleOptions{Window: policy.Window}
	res, err := node.Cycle(ctx, ref, opts)
	if !errors.Is(err, echostore.ErrInjectedFault) || res.Folded != 5 || res.Trimmed != 0 {
		t.Fatalf("the faulted Cycle: folded %d, trimmed %d, err %v; want 5 folded, none trimmed, ErrInjectedFault", res.Folded, res.Trimmed, err)
	}
	if res, err := node.Cycle(ctx, ref, opts); err != nil || res.Trimmed != 5 {
		t.Fatalf("the Cycle after the fault: trimmed %d, err %v; want 5", res.Trimmed, err)
	}
	if n := live(); n != 2 {
		t.Fatalf("%d entries live, want the window's 2", n)
	}

	if err := node.ArmFault(ref); err != nil {
		t.Fatal(err)
	}
	node.Undeclare(ref)
	if got := node.Faults(); len(got) != 0 {
		t.Fatalf("Faults() = %v after Undeclare, want none", got)
	}
	if err := node.ArmFault(names.StreamRef{}); !errors.Is(err, names.ErrInvalid) {
		t.Fatalf("ArmFault of no stream: %v, want names.ErrInvalid", err)
	}
}
