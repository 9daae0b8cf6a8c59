package api_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/echostore/echostore/api"
)

// TestJobJSON: a claimed job and a dead letter read back what MarshalJSON
// renders; members serve may add are skipped; a member given twice, invalid
// UTF-8, a value of the wrong kind, a missing "fields" and anything after
// the object are refused with ErrSyntax.
func TestJobJSON(t *testing.T) {
	fs := []api.Field{{Name: "b", Value: "2"}, {Name: "a", Value: "é\n"}}
	j := api.Job{ID: 1<<22 | 9, EntryID: "1704067200001-9", Attempt: 2, Fields: fs}
	b, err := j.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back api.Job
	if err := back.UnmarshalJSON(b); err != nil || !reflect.DeepEqual(back, j) {
		t.Fatalf("%s reads back as %+v, %v", b, back, err)
	}
	dl := api.DeadLetter{EntryID: "1704067200001-9", ID: 1<<22 | 9, Attempts: 3, Error: "boom", Fields: fs}
	if b, err = dl.MarshalJSON(); err != nil {
		t.Fatal(err)
	}
	var dlBack api.DeadLetter
	if err := dlBack.UnmarshalJSON(b); err != nil || !reflect.DeepEqual(dlBack, dl) {
		t.Fatalf("%s reads back as %+v, %v", b, dlBack, err)
	}
	const id = `"JOB_0000000040009"`
	if err := back.UnmarshalJSON([]byte(`{"id":` + id + `,"new":{"x":[1,2]},"fields":{"a":"1"}}`)); err != nil || back.Fields[0] != (api.Field{Name: "a", Value: "1"}) {
		t.Fatalf("an unknown member: %+v, %v", back, err)
	}
	for name, in := range map[string]string{
		"id twice":       `{"id":` + id + `,"id":` + id + `,"fields":{"a":"1"}}`,
		"invalid UTF-8":  `{"id":` + id + ",\"entry\":\"\xff\",\"fields\":{\"a\":\"1\"}}",
		"lone surrogate": `{"id":` + id + `,"entry":"\ud800","fields":{"a":"1"}}`,
		"string attempt": `{"id":` + id + `,"attempt":"2","fields":{"a":"1"}}`,
		"float attempt":  `{"id":` + id + `,"attempt":2.5,"fields":{"a":"1"}}`,
		"missing fields": `{"id":` + id + `}`,
		"trailing value": `{"id":` + id + `,"fields":{"a":"1"}} {}`,
		"trailing comma": `{"id":` + id + `,"fields":{"a":"1"},}`,
		"not an object":  `[]`,
		"empty input":    ``,
		"foreign brand":  `{"id":"EVT_0000000040009","fields":{"a":"1"}}`,
	} {
		var j api.Job
		if err := j.UnmarshalJSON([]byte(in)); !errors.Is(err, api.ErrSyntax) {
			t.Errorf("%s: UnmarshalJSON(%q) = %v, want ErrSyntax", name, in, err)
		}
	}
	// The fields' errors are the record decoder's, but for what jsontext
	// refuses as it reads the value (a name twice, invalid UTF-8).
	for in, want := range map[string]error{
		`{"id":` + id + `,"fields":{}}`:                api.ErrEmptyRecord,
		`{"id":` + id + `,"fields":[["a"]]}`:           api.ErrSyntax,
		`{"id":` + id + `,"fields":{"a":"1","a":"2"}}`: api.ErrSyntax,
		`{"id":` + id + `,"fields":{"a":1}}`:           api.ErrSyntax,
	} {
		var dl api.DeadLetter
		if err := dl.UnmarshalJSON([]byte(in)); !errors.Is(err, want) {
			t.Errorf("DeadLetter.UnmarshalJSON(%q) = %v, want %v", in, err, want)
		}
	}
}
