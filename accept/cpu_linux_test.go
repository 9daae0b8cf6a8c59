package accept

import (
	"context"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/echostore/echostore/brand"
)

// threadCPU is the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID):
// time the thread waits, for a core of the shared machine or for an
// fsync, is not in it.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// BenchmarkRecordCPU is the producer's side of bench all's outbox runs
// (20,000 records of 64 bytes into a fresh outbox, then Flush; K = 1,000
// and 10,000) in CPU time of the producer's thread per record: a figure
// that a machine shared with other work moves far less than the wall-clock
// rate, since neither waiting for a core nor for the fsync counts.
//
//	go test -run='^$' -bench=RecordCPU ./accept/
func BenchmarkRecordCPU(b *testing.B) {
	ctx := context.Background()
	for _, k := range []int{1000, 10000} {
		b.Run("K="+itoa(k), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			const n = 20000
			var per []float64
			for b.Loop() {
				b.StopTimer()
				o, err := Open(ctx, b.TempDir(), Options{K: k})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				b.StartTimer()
				c0 := threadCPU()
				for i := 1; i <= n; i++ {
					if err := o.Record(ctx, Intent{ID: brand.ID(i), Queue: qn("jobs"), Payload: benchPayload}); err != nil {
						b.Fatal(err)
					}
				}
				if err := o.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				per = append(per, float64(threadCPU()-c0)/n)
				b.StopTimer()
				if err := o.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			slices.Sort(per)
			b.ReportMetric(per[len(per)/2], "cpu-ns/record")
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

// processCPU is the CPU time of the whole process, user and system, every
// thread (the garbage collector's workers included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
