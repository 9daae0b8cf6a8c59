package mq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// FuzzDeliveryJSON: the decoders of a claimed job and a dead letter (what a
// client of serve reads) never panic, and what they accept renders back to
// JSON that decodes to the same value.
func FuzzDeliveryJSON(f *testing.F) {
	f.Add([]byte(`{"id":"JOB_0000000000001","entry":"1-1","attempt":2,"fields":{"a":"b","c":"d"}}`))
	f.Add([]byte(`{"entry":"1-1","id":"JOB_0000000000001","attempts":3,"error":"boom","fields":{"payload":"{}"}}`))
	f.Add([]byte(`{"id":"JOB_0000000000001","fields":[]}`))
	f.Add([]byte(`{"id":"EVT_0000000000001","fields":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Delivery
		if err := json.Unmarshal(data, &d); err == nil {
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("Marshal of a decoded job: %v", err)
			}
			var again Delivery
			if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(again, d) {
				t.Fatalf("job %s decodes to %+v (%v), want %+v", b, again, err, d)
			}
		}
		var dl DeadLetter
		if err := json.Unmarshal(data, &dl); err == nil {
			b, err := json.Marshal(dl)
			if err != nil {
				t.Fatalf("Marshal of a decoded dead letter: %v", err)
			}
			var again DeadLetter
			if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(again, dl) {
				t.Fatalf("dead letter %s decodes to %+v (%v), want %+v", b, again, err, dl)
			}
		}
	})
}

// parseLinesOneByOne is ParseJSONLines as serve had it: each line of
// bytes.Split trimmed and parsed by ParseInputLine.
func parseLinesOneByOne(body []byte) ([][]Field, error) {
	var out [][]Field
	for i, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		f, err := ParseInputLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// FuzzParseJSONLines: ParseJSONLines parses any body as parsing each line
// alone does: the same records, or the same error.
func FuzzParseJSONLines(f *testing.F) {
	f.Add([]byte("{\"fields\":{\"a\":\"1\"}}\n\n  {\"fields\":[[\"b\",\"2\"],[\"b\",\"3\"]]}\r\n"))
	f.Add([]byte("{\"fields\":{\"a\":\"\\u00e9\\n\"}}\n{\"fields\":{}}\n"))
	f.Add([]byte("\u00a0{\"fields\":{\"a\":\"x\"}}\u0085\n{\"id\":\"x\",\"fields\":{\"a\":\"1\"}}"))
	f.Add([]byte("{\"fields\":{\"a\":\"1\",\"a\":\"2\"}}\n{\"fields\":{\"\xff\":\"1\"}}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gerr := ParseJSONLines(body)
		want, werr := parseLinesOneByOne(body)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Fatalf("error %v, want %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("records %q, want %q", got, want)
		}
	})
}
