package mq

import (
	"encoding/json"
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
