package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/echostore/echostore/api"
)

// TestEnqueueBatchRoute: a sync batch through the API answers a receipt a
// job, each with the LSN that made it durable, and counts each job as
// enqueued; the same batch again with the receipts' ids is a retry of
// each; a job whose id another payload holds is that receipt's error
// alone; more than MaxBatch jobs is 400, and nothing is enqueued.
func TestEnqueueBatchRoute(t *testing.T) {
	e := start(t, Config{})
	q := queueName(t)
	body := `{"jobs":[{"payload":{"n":1}},{"payload":"two"},{"payload":[3]}]}`
	var res api.BatchResult
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/jobs/batch?mode=sync", body), &res); err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || len(res.Receipts) != 3 {
		t.Fatalf("sync batch: %+v", res)
	}
	var ids []string
	for i, r := range res.Receipts {
		if r.Error != "" || r.Mode != "sync" || r.LSN == nil || !strings.HasPrefix(r.ID, "JOB_") {
			t.Fatalf("receipt %d: %+v", i, r)
		}
		ids = append(ids, r.ID)
	}
	metrics := string(e.must("GET", "/metrics", ""))
	if want := fmt.Sprintf(`echostore_jobs_enqueued_total{mode="sync",queue=%q} 3`, q); !strings.Contains(metrics, want) {
		t.Fatalf("metrics lack %s", want)
	}
	retry := fmt.Sprintf(`{"jobs":[{"payload":{"n":1},"id":%q},{"payload":"not two","id":%q}]}`, ids[0], ids[1])
	var again api.BatchResult
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/jobs/batch", retry), &again); err != nil {
		t.Fatal(err)
	}
	if again.Failed != 1 || again.Receipts[0].Error != "" || again.Receipts[0].ID != ids[0] ||
		!strings.HasPrefix(again.Receipts[1].Error, "id_conflict: ") {
		t.Fatalf("the retry with a changed payload: %+v", again)
	}
	many := `{"jobs":[` + strings.Repeat(`{"payload":1},`, MaxBatch) + `{"payload":1}]}`
	code, b := e.do("POST", "/v1/queues/"+q+"/jobs/batch", testToken, strings.NewReader(many))
	if code != 400 || !strings.Contains(string(b), "give 1 to 1000 jobs") {
		t.Fatalf("a batch of %d: %d %s", MaxBatch+1, code, b)
	}
}
