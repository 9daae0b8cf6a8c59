package api

import (
	"encoding/json"
	"fmt"

	"github.com/echostore/echostore/brand"
)

// UnmarshalJSON parses what MarshalJSON renders,
// {"id":"JOB_…","entry":"<xid>","attempt":n,"fields":{…}}, the fields in
// order (a client of serve's API reads claimed jobs with it).
func (d *Job) UnmarshalJSON(data []byte) error {
	var v struct {
		ID      string          `json:"id"`
		Entry   string          `json:"entry"`
		Attempt int             `json:"attempt"`
		Fields  json.RawMessage `json:"fields"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("%w: job: %w", ErrSyntax, err)
	}
	id, err := brand.JOB.Parse(v.ID)
	if err != nil {
		return fmt.Errorf("%w: job id: %w", ErrSyntax, err)
	}
	fields, err := ParseFieldsJSON(v.Fields)
	if err != nil {
		return fmt.Errorf("job %s: fields: %w", v.ID, err)
	}
	*d = Job{ID: id, EntryID: v.Entry, Attempt: v.Attempt, Fields: fields}
	return nil
}

// UnmarshalJSON parses what MarshalJSON renders,
// {"entry":"<xid>","id":"JOB_…","attempts":n,"error":"…","fields":{…}}.
func (d *DeadLetter) UnmarshalJSON(data []byte) error {
	var v struct {
		Entry    string          `json:"entry"`
		ID       string          `json:"id"`
		Attempts int             `json:"attempts"`
		Error    string          `json:"error"`
		Fields   json.RawMessage `json:"fields"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("%w: dead letter: %w", ErrSyntax, err)
	}
	id, err := brand.JOB.Parse(v.ID)
	if err != nil {
		return fmt.Errorf("%w: dead letter id: %w", ErrSyntax, err)
	}
	fields, err := ParseFieldsJSON(v.Fields)
	if err != nil {
		return fmt.Errorf("dead letter %s: fields: %w", v.Entry, err)
	}
	*d = DeadLetter{EntryID: v.Entry, ID: id, Attempts: v.Attempts, Error: v.Error, Fields: fields}
	return nil
}
