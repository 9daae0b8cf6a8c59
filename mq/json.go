package mq

import (
	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/xid"
)

// The JSON of records is package api's (api/json.go): the one place that
// renders records and the one that parses them back. These are its names
// as mq has always given them.

// IDForm is api.IDForm: how AppendJSONAs prints a record's id.
type IDForm = api.IDForm

// The forms of an id (api.IDBranded, api.IDRedis).
const (
	// IDBranded prints the branded form "EVT_…" when the id has one, else
	// the Redis id "ms-seq". The default.
	IDBranded = api.IDBranded
	// IDRedis prints the Redis id "ms-seq" always.
	IDRedis = api.IDRedis
)

// FormatID is api.FormatID: id as AppendJSONAs prints it in form.
func FormatID(id xid.ID, form IDForm) string { return api.FormatID(id, form) }

// FormatIDs is api.FormatIDs: FormatID of each of ids, as strings that
// share one backing allocation.
func FormatIDs(ids []brand.ID, form IDForm) []string { return api.FormatIDs(ids, form) }

// ParseID is api.ParseID: a record id as a range bound or in a record's
// JSON, "EVT_…" or a Redis id.
func ParseID(s string, end bool) (xid.ID, error) { return api.ParseID(s, end) }

// AppendJSON is api.AppendJSON: the JSON form of r, its id branded.
func AppendJSON(dst []byte, r Record) []byte { return api.AppendJSON(dst, r) }

// AppendJSONAs is api.AppendJSONAs: the JSON form of r, its id in form.
func AppendJSONAs(dst []byte, r Record, form IDForm) []byte { return api.AppendJSONAs(dst, r, form) }

// AppendFieldsJSON is api.AppendFieldsJSON: fields in their order, as an
// object or as the pair form.
func AppendFieldsJSON(dst []byte, fields []Field) []byte { return api.AppendFieldsJSON(dst, fields) }

// ParseInputLine is api.ParseInputLine: the fields of one line of append
// input.
func ParseInputLine(data []byte) ([]Field, error) { return api.ParseInputLine(data) }

// ParseFieldsJSON is api.ParseFieldsJSON: fields as AppendFieldsJSON
// renders them, in order.
func ParseFieldsJSON(data []byte) ([]Field, error) { return api.ParseFieldsJSON(data) }

// ParseJSONLines is api.ParseJSONLines: a body of JSON lines of records to
// append.
func ParseJSONLines(body []byte) ([][]Field, error) { return api.ParseJSONLines(body) }
