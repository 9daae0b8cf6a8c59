package archive

import (
	"strconv"
	"strings"
	"testing"

	"github.com/echostore/echostore/brand"
	"github.com/echostore/echostore/mq"
)

// TestSecurityLargestAcceptedRecordFolds: every record the live tier
// accepts (mq's limits: 1,024 fields, 1 MiB of names and values) must fold
// into one archive page that graft accepts (1 MiB by default). A record the
// archive cannot fold stops every later cycle of its stream at it: nothing
// behind it is archived or trimmed again, and the stream grows without
// bound — a poison record any producer can append.
func TestSecurityLargestAcceptedRecordFolds(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name   string
		fields []mq.Field
	}{
		{"one field of 1 MiB", []mq.Field{{Name: "k", Value: strings.Repeat("v", mq.DefaultMaxBytes-1)}}},
		{"1024 fields", func() []mq.Field {
			fs := make([]mq.Field, mq.DefaultMaxFields)
			per := mq.DefaultMaxBytes / mq.DefaultMaxFields
			for i := range fs {
				name := "field-" + strconv.Itoa(i)
				fs[i] = mq.Field{Name: name, Value: strings.Repeat("v", per-len(name))}
			}
			return fs
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := (mq.Limits{}).Check(tc.fields); err != nil {
				t.Fatalf("the record is not within mq's limits: %v", err)
			}
			e := newEnv(t, servers.Redis(t).URL, Options{})
			id, err := e.live.Append(ctx, e.ref(), tc.fields...)
			if err != nil {
				t.Fatal(err)
			}
			e.append(ctx, 3)
			res, err := e.a.Cycle(ctx, e.ref(), Window{Keep: 1})
			if err != nil || res.Folded != 3 || res.State.Pages != 3 {
				t.Fatalf("a cycle over the largest accepted record %s: %+v, %v", brand.EVT.Format(id), res, err)
			}
		})
	}
}
