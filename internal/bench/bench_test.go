package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestMedianPercentileFormat(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("Median odd = %v", got)
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("Median even = %v", got)
	}
	if Median(nil) != 0 {
		t.Error("Median(nil) != 0")
	}
	var d []time.Duration
	for k := 1; k <= 100; k++ {
		d = append(d, time.Duration(k))
	}
	if Percentile(d, 50) != 50 || Percentile(d, 99) != 99 || Percentile(d, 100) != 100 {
		t.Errorf("Percentile: %v %v %v", Percentile(d, 50), Percentile(d, 99), Percentile(d, 100))
	}
	for v, want := range map[float64]string{1234567: "1,234,567", 999: "999", 2.5: "2.50", -4321: "-4,321"} {
		if got := FormatValue(v); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestReportOutputs(t *testing.T) {
	r := NewReport("suite", "cmd --x")
	r.Add("base", "ops/s", []float64{100, 300, 200}, "")
	r.Add("fast", "ops/s", []float64{500}, "a note")
	r.Compare("fast", "base", 2)
	r.Add("slow", "ops/s", []float64{100}, "")
	r.Compare("slow", "base", 2)
	r.Goal("base", 1000, false)
	r.Finish()
	if row := r.Row("fast"); row.Ratio != 2.5 || row.Met == nil || !*row.Met {
		t.Fatalf("fast row: %+v", row)
	}
	if row := r.Row("slow"); row.Met == nil || *row.Met {
		t.Fatalf("slow row: %+v", row)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cmd --x", "2.50×", "≥ 2× ✓", "≥ 2× ✗ missed", "a note"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Rows) != 3 || back.Rows[0].Value != 200 {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	if NewProgress(&table, &table, 3).bar != nil {
		t.Error("progress bar drawn on a non-terminal")
	}
}
