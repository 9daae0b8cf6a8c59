package accept

import (
	"context"
	"errors"
	"testing"

	"github.com/echostore/echostore/brand"
)

// TestRecordBelowReserve: with the directory below its reserve, every
// Record is refused with ErrDiskFull and nothing is recorded, the ones
// between the guard's measurements (every 64th Record) included.
func TestRecordBelowReserve(t *testing.T) {
	ctx := context.Background()
	o, err := Open(ctx, t.TempDir(), Options{DiskReserve: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(ctx)
	for i := 1; i <= 3*diskCheckEvery; i++ {
		err := o.Record(ctx, Intent{ID: brand.ID(i), Queue: qn("jobs"), Payload: []byte("p")})
		if !errors.Is(err, ErrDiskFull) {
			t.Fatalf("record %d below the reserve: %v, want ErrDiskFull", i, err)
		}
	}
	if st := o.Stats(); st.Appended != 0 || st.Live != 0 {
		t.Fatalf("after refused records: %+v", st)
	}
}
