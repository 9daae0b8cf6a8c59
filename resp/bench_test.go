package resp_test

import (
	"strconv"
	"testing"

	"github.com/echostore/echostore/resp"
)

// BenchmarkFrontRead is bench all's RESP read figure as a Go benchmark:
// 100,000 records of three small fields, 1,000 of them live and the rest
// archived by one cycle, read whole by one XRANGE - + (or XREAD STREAMS
// from 0) through the front, beside Redis serving the same records kept
// live. Each iteration reads one whole reply raw; rec/s is the figure,
// allocs/op the front's allocations (and the client's, a few) per read:
//
//	go test -run='^$' -bench=FrontRead -benchmem ./resp/
func BenchmarkFrontRead(b *testing.B) {
	const n, live = 100_000, 1000
	e := newEnv(b, false)
	ref, archived := e.ref("archived")
	plain := archived + ":plain"
	direct := dial(b, e.redis)
	const batch = 1000
	for done := 0; done < n; done += batch {
		var buf []byte
		for i := range batch {
			id := strconv.Itoa(1_700_000_000_000+done+i) + "-0"
			num := strconv.Itoa(done + i)
			for _, key := range []string{archived, plain} {
				buf = append(buf, "*9\r\n$4\r\nXADD\r\n$"+strconv.Itoa(len(key))+"\r\n"+key+"\r\n$"+strconv.Itoa(len(id))+"\r\n"+id+
					"\r\n$4\r\nuser\r\n$6\r\nu-1234\r\n$4\r\nkind\r\n$5\r\nclick\r\n$1\r\nn\r\n$"+strconv.Itoa(len(num))+"\r\n"+num+"\r\n"...)
			}
		}
		if _, err := direct.c.Write(buf); err != nil {
			b.Fatal(err)
		}
		for range 2 * batch {
			if rep := direct.read(); rep[0] == '-' {
				b.Fatal(rep)
			}
		}
	}
	e.cycle(ref, live)
	via := dial(b, e.front)
	for _, c := range []struct {
		name string
		cl   *client
		args []string
	}{
		{"front-XRANGE", via, []string{"XRANGE", archived, "-", "+"}},
		{"redis-XRANGE", direct, []string{"XRANGE", plain, "-", "+"}},
		{"front-XREAD", via, []string{"XREAD", "STREAMS", archived, "0"}},
		{"redis-XREAD", direct, []string{"XREAD", "STREAMS", plain, "0"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				c.cl.send(c.args...)
				var err error
				if buf, err = resp.ReadReply(c.cl.r, buf[:0]); err != nil {
					b.Fatal(err)
				}
				if len(buf) < n*40 {
					b.Fatalf("a short reply: %.100q", buf)
				}
			}
			b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "rec/s")
		})
	}
}
