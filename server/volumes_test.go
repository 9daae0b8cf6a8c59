package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/echostore/echostore"
	"github.com/echostore/echostore/graft"
)

// TestVolumeErrorCodes: a reset refused for what it would discard is 409
// would_discard, one against another remote 409 remote_mismatch (the
// refusals themselves: echostore's TestResetAcceptJobs).
func TestVolumeErrorCodes(t *testing.T) {
	refused := fmt.Errorf("reset: %w", &graft.DiscardError{Volume: "accept.jobs.0", Count: 5, What: echostore.WhatJobs})
	if status, code := classify(volumeError(refused)); status != http.StatusConflict || code != CodeWouldDiscard {
		t.Fatalf("%v: %d %s, want 409 %s", refused, status, code, CodeWouldDiscard)
	}
	mismatch := fmt.Errorf("reset: %w", graft.ErrRemoteMismatch)
	if status, code := classify(volumeError(mismatch)); status != http.StatusConflict || code != CodeRemoteMismatch {
		t.Fatalf("%v: %d %s, want 409 %s", mismatch, status, code, CodeRemoteMismatch)
	}
}
