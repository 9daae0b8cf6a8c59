package mq

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/echostore/echostore/xid"

	"github.com/echostore/echostore/brand"
	"pgregory.net/rapid"
)

func TestLimitsCheck(t *testing.T) {
	big := strings.Repeat("x", 100)
	many := make([]Field, 11)
	for i := range many {
		many[i] = Field{Name: string(rune('a' + i)), Value: "v"}
	}
	lim := Limits{MaxFields: 10, MaxBytes: 150}
	cases := []struct {
		name   string
		fields []Field
		want   error
		field  string
	}{
		{"ok", fields("a", "1", "b", ""), nil, ""},
		{"empty name and value are data", fields("", ""), nil, ""},
		{"no fields", nil, ErrEmptyRecord, ""},
		{"duplicate", fields("a", "1", "b", "2", "a", "3"), ErrDuplicateField, "a"},
		{"duplicate among many", append(many[:9:9], Field{Name: "c"}), ErrDuplicateField, "c"},
		{"bad utf8 value", fields("a", "\xff"), ErrInvalidUTF8, "a"},
		{"bad utf8 name", fields("\xc3", "v"), ErrInvalidUTF8, "\xc3"},
		{"too many fields", many, ErrTooLarge, ""},
		{"too many bytes", fields("a", big, "b", big), ErrTooLarge, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := lim.Check(tc.fields)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("%v does not wrap ErrInvalidRecord", err)
			}
			var re *RecordError
			if !errors.As(err, &re) || re.Field != tc.field {
				t.Errorf("error %v: want a *RecordError for field %q", err, tc.field)
			}
		})
	}
	// A large duplicate-free record takes the map path.
	wide := make([]Field, 500)
	for i := range wide {
		wide[i] = Field{Name: strings.Repeat("n", i+1)}
	}
	if err := (Limits{}).Check(wide); err != nil {
		t.Fatalf("500 distinct fields: %v", err)
	}
	wide[499].Name = wide[3].Name
	if err := (Limits{}).Check(wide); !errors.Is(err, ErrDuplicateField) {
		t.Fatalf("500 fields with a duplicate: %v", err)
	}
}

func TestRecordJSONGolden(t *testing.T) {
	id, _ := brand.Make(1234, 5, 6)
	rec := Record{ID: id.XID(), Fields: fields("z", "last?", "a", "quote \" back \\ nl \n tab \t ctl \x01", "é", "\u2028<&>")}
	got, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"` + brand.EVT.Format(id) + `","fields":{"z":"last?","a":"quote \" back \\ nl \n tab \t ctl \u0001","é":"\u2028\u003c\u0026\u003e"}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if direct := AppendJSON(nil, rec); string(direct) != want {
		t.Fatalf("AppendJSON differs from json.Marshal:\n%s\n%s", direct, want)
	}
	// encoding/json reads it back to the same values (our output is JSON).
	var generic struct {
		ID     string            `json:"id"`
		Fields map[string]string `json:"fields"`
	}
	if err := json.Unmarshal(got, &generic); err != nil || generic.Fields["a"] != rec.Fields[1].Value {
		t.Fatalf("encoding/json reads %+v, %v", generic, err)
	}
	var back Record
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !sameRecord(back, rec) {
		t.Fatalf("round trip: %+v, want %+v", back, rec)
	}
}

func TestRecordJSONRejects(t *testing.T) {
	id := brand.EVT.Format(1)
	cases := map[string]struct {
		in   string
		want error
	}{
		"duplicate field":      {`{"id":"` + id + `","fields":{"a":"1","a":"2"}}`, ErrDuplicateField},
		"empty fields":         {`{"id":"` + id + `","fields":{}}`, ErrEmptyRecord},
		"number value":         {`{"id":"` + id + `","fields":{"a":1}}`, ErrSyntax},
		"null value":           {`{"id":"` + id + `","fields":{"a":null}}`, ErrSyntax},
		"missing id":           {`{"fields":{"a":"1"}}`, ErrSyntax},
		"missing fields":       {`{"id":"` + id + `"}`, ErrSyntax},
		"unknown key":          {`{"id":"` + id + `","fields":{"a":"1"},"x":1}`, ErrSyntax},
		"id twice":             {`{"id":"` + id + `","id":"` + id + `","fields":{"a":"1"}}`, ErrSyntax},
		"foreign brand":        {`{"id":"` + brand.JOB.Format(1) + `","fields":{"a":"1"}}`, brand.ErrBrand},
		"malformed id":         {`{"id":"EVT_x","fields":{"a":"1"}}`, brand.ErrMalformed},
		"raw invalid utf8":     {`{"id":"` + id + "\",\"fields\":{\"a\":\"\xff\"}}", ErrInvalidUTF8},
		"lone high surrogate":  {`{"id":"` + id + `","fields":{"a":"\ud800"}}`, ErrInvalidUTF8},
		"lone low surrogate":   {`{"id":"` + id + `","fields":{"a":"\udc00x"}}`, ErrInvalidUTF8},
		"bad surrogate pair":   {`{"id":"` + id + `","fields":{"a":"\ud800\u0041"}}`, ErrInvalidUTF8},
		"control char":         {`{"id":"` + id + "\",\"fields\":{\"a\":\"\n\"}}", ErrSyntax},
		"bad escape":           {`{"id":"` + id + `","fields":{"a":"\x"}}`, ErrSyntax},
		"trailing garbage":     {`{"id":"` + id + `","fields":{"a":"1"}} x`, ErrSyntax},
		"trailing comma":       {`{"id":"` + id + `","fields":{"a":"1",}}`, ErrSyntax},
		"unterminated":         {`{"id":"` + id + `","fields":{"a":"1`, ErrSyntax},
		"not an object":        {`[]`, ErrSyntax},
		"empty input":          {``, ErrSyntax},
		"short unicode escape": {`{"id":"` + id + `","fields":{"a":"\u12"}}`, ErrSyntax},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var r Record
			err := r.UnmarshalJSON([]byte(tc.in))
			if !errors.Is(err, tc.want) {
				t.Fatalf("UnmarshalJSON(%q) = %v, want %v", tc.in, err, tc.want)
			}
		})
	}
}

func TestParseInputLine(t *testing.T) {
	got, err := ParseInputLine([]byte(` { "fields" : { "b" : "2", "a":"\u00e9\ud83d\ude00" } }` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fields("b", "2", "a", "é😀"); !sameFields(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := ParseInputLine([]byte(`{"id":"` + brand.EVT.Format(1) + `","fields":{"a":"1"}}`)); !errors.Is(err, ErrSyntax) {
		t.Fatalf("an input line with an id: %v, want ErrSyntax", err)
	}
	f, err := ParseFieldsJSON([]byte(`{"x":"1","y":"2"}`))
	if err != nil || !sameFields(f, fields("x", "1", "y", "2")) {
		t.Fatalf("ParseFieldsJSON: %v %v", f, err)
	}
}

func sameFields(a, b []Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameRecord(a, b Record) bool { return a.ID == b.ID && sameFields(a.Fields, b.Fields) }

// genRecord draws a valid record: distinct names, any valid UTF-8.
func genRecord(t *rapid.T) Record {
	n := rapid.IntRange(1, 12).Draw(t, "n")
	seen := map[string]bool{}
	var fs []Field
	for len(fs) < n {
		name := rapid.String().Draw(t, "name")
		if seen[name] {
			continue
		}
		seen[name] = true
		fs = append(fs, Field{Name: name, Value: rapid.String().Draw(t, "value")})
	}
	return Record{ID: brand.ID(rapid.Uint64().Draw(t, "id")).XID(), Fields: fs}
}

// The JSON form round-trips every valid record, keeps field order, and is
// what encoding/json reads as the same object.
func TestRecordJSONProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec := genRecord(t)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if direct := AppendJSON(nil, rec); string(direct) != string(b) {
			t.Fatalf("json.Marshal and AppendJSON differ:\n%s\n%s", b, direct)
		}
		if !utf8.Valid(b) || !json.Valid(b) {
			t.Fatalf("not valid JSON: %q", b)
		}
		var back Record
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		if !sameRecord(back, rec) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", rec, back)
		}
		// Field order in the text is stored order.
		pos := 0
		for _, f := range rec.Fields {
			// The name as the object form prints it: {"name":""} less
			// the braces and the empty value.
			one := string(AppendFieldsJSON(nil, []Field{{Name: f.Name}}))
			key := strings.TrimSuffix(strings.TrimPrefix(one, "{"), `""}`)
			i := strings.Index(string(b[pos:]), key)
			if i < 0 {
				t.Fatalf("field %q not found in order in %s", f.Name, b)
			}
			pos += i + len(key)
		}
		var generic map[string]any
		if err := json.Unmarshal(b, &generic); err != nil {
			t.Fatal(err)
		}
		fm := generic["fields"].(map[string]any)
		for _, f := range rec.Fields {
			if fm[f.Name] != f.Value {
				t.Fatalf("encoding/json reads field %q as %q, want %q", f.Name, fm[f.Name], f.Value)
			}
		}
		// Rendering is deterministic: the decoded record prints the same bytes.
		again, _ := json.Marshal(back)
		if string(again) != string(b) {
			t.Fatalf("second rendering differs:\n%s\n%s", b, again)
		}
	})
}

// FuzzRecordJSON: the decoder never panics; what it accepts is valid JSON
// that encoding/json reads alike (the object form as a map, the pair form as
// pairs of strings or {"b64":…}), and re-encodes to text it accepts again.
func FuzzRecordJSON(f *testing.F) {
	id := brand.EVT.Format(385731673808961536)
	for _, s := range []string{
		`{"id":"` + id + `","fields":{"a":"1","b":"2"}}`,
		`{"fields":{"a":"\u00e9"},"id":"` + id + `"}`,
		`{"id":"` + id + `","fields":{"a":"\ud83d\ude00","b":"\\\"\/"}}`,
		`{"id":"` + id + `","fields":{"a":"1","a":"2"}}`,
		`{"id":"0-1","fields":[["a","1"],["a","2"]]}`,
		`{"id":"5-0","fields":[["k",{"b64":"/wA="}],[{"b64":"/g=="},"\u003c"]]}`,
		`{"id":"5-0","fields":[["k",{"b64":"YQ=="}]]}`,
		`{"id":"EVT_0","fields":{}}`,
		`{"fields":{"x":"y"}}`,
		``, `{`, `"`, `{"id":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var rec Record
		err := rec.UnmarshalJSON(data)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrInvalidRecord) &&
				!errors.Is(err, brand.ErrMalformed) && !errors.Is(err, brand.ErrBrand) && !errors.Is(err, xid.ErrSyntax) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		var generic struct {
			ID     string          `json:"id"`
			Fields json.RawMessage `json:"fields"`
		}
		if err := json.Unmarshal(data, &generic); err != nil {
			t.Fatalf("encoding/json rejects what we accept %q: %v", data, err)
		}
		var obj map[string]string
		if json.Unmarshal(generic.Fields, &obj) == nil {
			if err := (Limits{MaxFields: 1 << 30, MaxBytes: 1 << 30}).Check(rec.Fields); err != nil {
				t.Fatalf("accepted an invalid record %q: %v", data, err)
			}
			for _, fl := range rec.Fields {
				if obj[fl.Name] != fl.Value {
					t.Fatalf("field %q: we read %q, encoding/json %q", fl.Name, fl.Value, obj[fl.Name])
				}
			}
		} else {
			var pairs [][]json.RawMessage
			if err := json.Unmarshal(generic.Fields, &pairs); err != nil || len(pairs) != len(rec.Fields) {
				t.Fatalf("fields %s: neither an object nor %d pairs (%v)", generic.Fields, len(rec.Fields), err)
			}
			str := func(m json.RawMessage) string {
				var s string
				if json.Unmarshal(m, &s) == nil {
					return s
				}
				var b struct {
					B64 []byte `json:"b64"`
				}
				if err := json.Unmarshal(m, &b); err != nil {
					t.Fatalf("pair element %s: %v", m, err)
				}
				return string(b.B64)
			}
			for i, p := range pairs {
				if len(p) != 2 || str(p[0]) != rec.Fields[i].Name || str(p[1]) != rec.Fields[i].Value {
					t.Fatalf("pair %d %s: we read %q", i, p, rec.Fields[i])
				}
			}
		}
		for _, form := range []IDForm{IDBranded, IDRedis} {
			out := AppendJSONAs(nil, rec, form)
			var back Record
			if err := back.UnmarshalJSON(out); err != nil || !sameRecord(back, rec) {
				t.Fatalf("re-encoded %q does not read back: %v", out, err)
			}
		}
	})
}

// FuzzDecodeEntry: the Redis entry decoder never panics, accepts exactly
// the entries whose id is a Redis id and whose fields are name/value pairs
// (any bytes, duplicates, empty values), and what it accepts renders to
// JSON that reads back the same, in both id forms.
func FuzzDecodeEntry(f *testing.F) {
	f.Add("1704067200000-0", "a\x00b")
	f.Add("1796032797584-4194303", "a\x00b\x00c\x00d")
	f.Add("1796032797584-4194304", "a\x00b")
	f.Add("0-1", "a\x00b")
	f.Add("1796032797584-1", "a\x00b\x00a\x00c")
	f.Add("1796032797584-1", "a\x00\xff")
	f.Add("1796032797584-1", "\xfe\x00")
	f.Add("17960327975840000000000-1", "a")
	f.Add("x", "")
	f.Fuzz(func(t *testing.T, text, flat string) {
		var kv []string
		if flat != "" {
			kv = strings.Split(flat, "\x00")
		}
		rec, err := decodeEntry("k", text, kv)
		_, idErr := xid.Parse(text)
		if err != nil {
			var ee *EntryError
			if !errors.As(err, &ee) || !errors.Is(err, ErrForeignEntry) || ee.XID != text {
				t.Fatalf("error %v is not an *EntryError for %q", err, text)
			}
			if idErr == nil && len(kv) > 0 && len(kv)%2 == 0 {
				t.Fatalf("rejected a valid entry %q %q: %v", text, kv, err)
			}
			return
		}
		if idErr != nil || rec.ID.String() != text {
			t.Fatalf("accepted %q as id %v", text, rec.ID)
		}
		if !sameFields(rec.Fields, pairs(kv)) {
			t.Fatalf("fields %q decoded as %q", kv, rec.Fields)
		}
		for _, form := range []IDForm{IDBranded, IDRedis} {
			var back Record
			if err := back.UnmarshalJSON(AppendJSONAs(nil, rec, form)); err != nil || !sameRecord(back, rec) {
				t.Fatalf("decoded entry does not round-trip through JSON (form %d): %v", form, err)
			}
		}
	})
}

func pairs(kv []string) []Field {
	out := make([]Field, len(kv)/2)
	for i := range out {
		out[i] = Field{Name: kv[2*i], Value: kv[2*i+1]}
	}
	return out
}

// TestByteRecordJSON: records that are not a UTF-8 object render as the
// array form, with bytes that are not UTF-8 in base64, and ids without a
// branded id as Redis ids; each reads back the same.
func TestByteRecordJSON(t *testing.T) {
	branded := brand.ID(1<<22 | 5)
	for _, c := range []struct {
		rec  Record
		form IDForm
		want string
	}{
		{Record{ID: branded.XID(), Fields: fields("a", "1")}, IDBranded, `{"id":"EVT_0000000040005","fields":{"a":"1"}}`},
		{Record{ID: branded.XID(), Fields: fields("a", "1")}, IDRedis, `{"id":"1704067200001-5","fields":{"a":"1"}}`},
		{Record{ID: xid.ID{Ms: 0, Seq: 1}, Fields: fields("a", "1")}, IDBranded, `{"id":"0-1","fields":{"a":"1"}}`},
		{Record{ID: xid.ID{Ms: 1704067200001, Seq: 1 << 22}, Fields: fields("a", "")}, IDBranded, `{"id":"1704067200001-4194304","fields":{"a":""}}`},
		{Record{ID: xid.ID{Ms: 5}, Fields: fields("a", "1", "a", "2")}, IDBranded, `{"id":"5-0","fields":[["a","1"],["a","2"]]}`},
		{Record{ID: xid.ID{Ms: 5}, Fields: fields("k", "\xff\x00", "\xfe", "<é>")}, IDBranded,
			`{"id":"5-0","fields":[["k",{"b64":"/wA="}],[{"b64":"/g=="},"\u003cé\u003e"]]}`},
	} {
		got := string(AppendJSONAs(nil, c.rec, c.form))
		if got != c.want {
			t.Fatalf("AppendJSONAs(%+v, %d) = %s, want %s", c.rec, c.form, got, c.want)
		}
		var back Record
		if err := back.UnmarshalJSON([]byte(got)); err != nil || !sameRecord(back, c.rec) {
			t.Fatalf("%s reads back as %+v, %v", got, back, err)
		}
	}
	if AppendJSON(nil, Record{ID: branded.XID(), Fields: fields("a", "1")})[7] != 'E' {
		t.Fatal("AppendJSON is not the branded form")
	}
	// Input lines take the array form too, so what a read prints appends
	// back: bytes, repeated names; an id is still refused.
	if f, err := ParseInputLine([]byte(`{"fields":[["k",{"b64":"/wA="}],["k",""]]}`)); err != nil || !reflect.DeepEqual(f, fields("k", "\xff\x00", "k", "")) {
		t.Fatalf("array form on input: %q, %v", f, err)
	}
	if _, err := ParseInputLine([]byte(`{"id":"5-0","fields":[["a","1"]]}`)); !errors.Is(err, ErrSyntax) {
		t.Fatalf("array form with an id on input: %v", err)
	}
	if _, err := ParseInputLine([]byte(`{"fields":[]}`)); !errors.Is(err, ErrEmptyRecord) {
		t.Fatalf("empty array form on input: %v", err)
	}
	for _, bad := range []string{
		`{"id":"5-0","fields":[]}`,
		`{"id":"5-0","fields":[["a"]]}`,
		`{"id":"5-0","fields":[["a",{"b64":"YQ=="}]]}`, // valid UTF-8 in b64
		`{"id":"5-0","fields":[["a",{"b64":"!!"}]]}`,
		`{"id":"5-0","fields":[["a",{"hex":"ff"}]]}`,
		`{"id":"05-0","fields":{"a":"1"}}`,
	} {
		var r Record
		if err := r.UnmarshalJSON([]byte(bad)); err == nil {
			t.Fatalf("%s parsed as %+v", bad, r)
		}
	}
}

// TestParseID: range bounds take the branded form and Redis ids, "ms" alone
// as XRANGE reads it.
func TestParseID(t *testing.T) {
	b := brand.ID(1<<22 | 5)
	for _, c := range []struct {
		s    string
		end  bool
		want xid.ID
	}{
		{brand.EVT.Format(b), false, b.XID()},
		{"0-1", false, xid.ID{Ms: 0, Seq: 1}},
		{"1704067200001-4194304", true, xid.ID{Ms: 1704067200001, Seq: 1 << 22}},
		{"7", false, xid.ID{Ms: 7}},
		{"7", true, xid.ID{Ms: 7, Seq: ^uint64(0)}},
	} {
		if got, err := ParseID(c.s, c.end); err != nil || got != c.want {
			t.Fatalf("ParseID(%q, %v) = %v, %v; want %v", c.s, c.end, got, err, c.want)
		}
	}
	if _, err := ParseID("JOB_0000000000001", false); !errors.Is(err, brand.ErrBrand) {
		t.Fatalf("a JOB id: %v", err)
	}
	for _, bad := range []string{"", "nonsense", "-", "+", "01-1"} {
		if _, err := ParseID(bad, false); !errors.Is(err, xid.ErrSyntax) {
			t.Fatalf("ParseID(%q) = %v", bad, err)
		}
	}
	if got := FormatID(b.XID(), IDRedis); got != "1704067200001-5" {
		t.Fatalf("FormatID redis: %s", got)
	}
	if got := FormatID(xid.ID{Seq: 1}, IDBranded); got != "0-1" {
		t.Fatalf("FormatID of an id without a branded id: %s", got)
	}
}

// FuzzInputLine: the append input decoder never panics, fails with a typed
// error, and what it accepts (either form) is a record whose fields, as a
// read renders them (AppendFieldsJSON), parse back as input to the same
// fields.
func FuzzInputLine(f *testing.F) {
	for _, s := range []string{
		`{"fields":{"a":"1","b":"2"}}`,
		`{"fields":[["a","1"],["a","2"]]}`,
		`{"fields":[["k",{"b64":"/wA="}],[{"b64":"/g=="},"\u003c"]]}`,
		`{"fields":[]}`, `{"fields":[["a"]]}`, `{"id":"0-1","fields":[["a","1"]]}`,
		``, `{`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := ParseInputLine(data)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(fields) == 0 {
			t.Fatalf("accepted a record without fields: %q", data)
		}
		line := append(AppendFieldsJSON([]byte(`{"fields":`), fields), '}')
		again, err := ParseInputLine(line)
		if err != nil || !reflect.DeepEqual(again, fields) {
			t.Fatalf("%q re-rendered as %q parses to %q, %v", data, line, again, err)
		}
	})
}

// TestFormatIDs: FormatIDs formats each id as FormatID does, in both
// forms, whether the id is branded or not.
func TestFormatIDs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOf(rapid.Custom(func(t *rapid.T) brand.ID { return brand.ID(rapid.Uint64().Draw(t, "id")) })).Draw(t, "ids")
		for _, form := range []IDForm{IDBranded, IDRedis} {
			got := FormatIDs(ids, form)
			if len(got) != len(ids) {
				t.Fatalf("%d strings for %d ids", len(got), len(ids))
			}
			for i, id := range ids {
				if want := FormatID(id.XID(), form); got[i] != want {
					t.Fatalf("form %v, id %d: %q, want %q", form, i, got[i], want)
				}
			}
		}
	})
}
