package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	echostore "github.com/echostore/echostore"
)

// TestExportRoute: POST …/export puts the stream's records into the
// remote bucket under exports/<volume>/ and answers the export's result;
// a second one puts only what came after; a body that does not parse, a
// bad to or rows_per_file is 400 before anything is written.
func TestExportRoute(t *testing.T) {
	q := queueName(t)
	bucket := t.TempDir()
	e := start(t, Config{Remote: "file://" + bucket})
	path := "/v1/streams/" + q + "/s"
	appendN(e, q, "s", 0, 30)
	e.must("POST", path+"/cycle?keep=5", "")
	for _, bad := range []string{`{"to":"x"}`, `{"rows_per_file":-1}`, `{"rows":5}`, `[`} {
		code, b := e.do("POST", path+"/export", testToken, strings.NewReader(bad))
		e.wantError(code, b, http.StatusBadRequest, CodeBadRequest)
	}
	if _, err := os.Stat(filepath.Join(bucket, "exports")); !os.IsNotExist(err) {
		t.Fatalf("a refused export wrote into the bucket: %v", err)
	}
	var res echostore.ExportResult
	if err := json.Unmarshal(e.must("POST", path+"/export", `{"rows_per_file":20}`), &res); err != nil {
		t.Fatal(err)
	}
	if res.Rows != 30 || len(res.Files) != 2 || res.Manifest != "exports/archive."+q+".s/manifest.json" {
		t.Fatalf("export: %+v; want 30 rows in 2 files, the manifest at exports/archive.%s.s/", res, q)
	}
	if _, err := os.Stat(filepath.Join(bucket, filepath.FromSlash(res.Manifest))); err != nil {
		t.Fatalf("the manifest is not in the bucket: %v", err)
	}
	appendN(e, q, "s", 30, 4)
	var again echostore.ExportResult
	if err := json.Unmarshal(e.must("POST", path+"/export", ""), &again); err != nil {
		t.Fatal(err)
	}
	if again.Rows != 4 || again.ResumedAfter == nil || *again.ResumedAfter != *res.Watermark {
		t.Fatalf("second export: %+v; want the 4 new records after %s", again, *res.Watermark)
	}
}
