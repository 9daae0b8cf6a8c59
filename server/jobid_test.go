package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/echostore/echostore/brand"
)

// TestEnqueueFutureID: an explicit job id ahead of this node's clock (a
// few seconds, or the last id of the space) is 400 invalid_input and
// nothing is enqueued, so that no later minted id is a planted one and a
// restart mints as before; an explicit id from the past, and the retry of
// a minted id, work as they did (idempotent with the same payload, 409
// id_conflict with another).
func TestEnqueueFutureID(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	jobs := "/v1/queues/" + q + "/jobs"
	soon, err := brand.Make(time.Now().Add(3*time.Second).UnixMilli()-brand.EpochMillis, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{brand.JOB.Format(soon), "JOB_FZZZZZZZZZZZZ"} {
		for _, mode := range []string{"", "?mode=sync"} {
			code, b := e.do("POST", jobs+mode, "", strings.NewReader(`{"payload":"evil","id":"`+id+`"}`))
			e.wantError(code, b, http.StatusBadRequest, CodeInvalidInput)
			if !strings.Contains(string(b), "future") {
				t.Fatalf("the refusal of %s does not say why: %s", id, b)
			}
		}
	}
	past, err := brand.Make(time.Now().Add(-time.Hour).UnixMilli()-brand.EpochMillis, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	var minted struct{ ID string }
	if err := json.Unmarshal(e.must("POST", jobs, `{"payload":"m"}`), &minted); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, payload string }{{brand.JOB.Format(past), `"p"`}, {minted.ID, `"m"`}} {
		for _, mode := range []string{"", "?mode=sync", ""} {
			var rc struct{ ID string }
			if err := json.Unmarshal(e.must("POST", jobs+mode, `{"payload":`+c.payload+`,"id":"`+c.id+`"}`), &rc); err != nil || rc.ID != c.id {
				t.Fatalf("enqueue of %s%s: %+v %v", c.id, mode, rc, err)
			}
		}
		code, b := e.do("POST", jobs, "", strings.NewReader(`{"payload":"x","id":"`+c.id+`"}`))
		e.wantError(code, b, http.StatusConflict, CodeIDConflict)
	}
	c := e.stopAndConnect()
	ds, err := c.Claim(t.Context(), mustQueue(t, q), "w", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("claimed %+v, want the job from the past and the minted one", ds)
	}
	// A restart mints as before.
	e2 := start(t, Config{Redis: e.cfg.Redis, Data: e.cfg.Data})
	e2.must("POST", jobs+"?mode=sync", `{"payload":"after"}`)
	e2.must("POST", "/v1/queues/"+q+"x/jobs", `{"payload":"after"}`)
}
