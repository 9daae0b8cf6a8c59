package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReadAsOfRoute: ?as_of= reads the archive as an LSN or a time held
// it, the records a retention cycle dropped since included (history:
// keeps the state); a state no longer kept is 410 gone, and an LSN above
// the head and malformed or contradictory parameters are 400.
func TestReadAsOfRoute(t *testing.T) {
	for _, history := range []time.Duration{time.Hour, 0} {
		t.Run(history.String(), func(t *testing.T) {
			q := queueName(t)
			e := start(t, Config{History: history})
			path := "/v1/streams/" + q + "/s"
			ids := appendN(e, q, "s", 0, 20)
			e.must("POST", path+"/cycle?keep=2", "")
			var st struct{ LSN uint64 }
			if err := json.Unmarshal(e.must("GET", path+"/archive", ""), &st); err != nil {
				t.Fatal(err)
			}
			at := time.Now().UTC().Format(time.RFC3339Nano)
			e.must("POST", path+"/cycle?keep=2&retain_count=5", "")
			lines := func(b []byte) []string { return strings.Fields(string(b)) }
			if got := lines(e.must("GET", path+"?archive_only=true", "")); len(got) != 5 {
				t.Fatalf("the archive now: %d records, want the 5 retained", len(got))
			}
			for _, bad := range []string{"as_of=0", "as_of=x", "as_of=2026-03-01", "as_of=1&live_only=true"} {
				code, b := e.do("GET", path+"?"+bad, "", nil)
				e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
			}
			code, b := e.do("GET", path+"?as_of=999999", "", nil)
			e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
			if history == 0 {
				code, b := e.do("GET", fmt.Sprintf("%s?as_of=%d", path, st.LSN), "", nil)
				e.wantError(code, b, http.StatusGone, CodeGone)
				return
			}
			for _, as := range []string{fmt.Sprint(st.LSN), at} {
				got := lines(e.must("GET", path+"?as_of="+as, ""))
				if len(got) != 18 || !strings.Contains(got[0], ids[0]) || !strings.Contains(got[17], ids[17]) {
					t.Fatalf("as of %s: %d records, want the 18 folded before the drop:\n%s", as, len(got), strings.Join(got, "\n"))
				}
				if got := lines(e.must("GET", path+"?reverse=true&limit=2&as_of="+as, "")); len(got) != 2 || !strings.Contains(got[0], ids[17]) {
					t.Fatalf("as of %s, newest 2: %v", as, got)
				}
			}
		})
	}
}
