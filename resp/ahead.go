package resp

import (
	"iter"

	echostore "github.com/echostore/echostore"
)

// aheadMin is the smallest COUNT whose read runs ahead (a read without
// COUNT always does): below it a goroutine costs more than it saves.
const aheadMin = 1024

// aheadBatch is the records per batch handed from the reading goroutine.
const aheadBatch = 256

// item is one element of a read: a record or an error.
type item struct {
	rec echostore.Record
	err error
}

// ahead runs seq in a goroutine of its own, in batches of records ahead of
// the loop that ranges over the sequence it returns: the archive's page
// scan and decode on one core, the reply's rendering on the other. The
// sequence is ranged once; when its loop ends, whether seq ran to its end
// or the loop stopped early, seq's goroutine has returned (its snapshot is
// closed).
func ahead(seq iter.Seq2[echostore.Record, error]) iter.Seq2[echostore.Record, error] {
	return func(yield func(echostore.Record, error) bool) {
		full := make(chan []item, 2)
		free := make(chan []item, 3)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(full)
			b := make([]item, 0, aheadBatch)
			send := func() bool {
				select {
				case full <- b:
				case <-stop:
					return false
				}
				select {
				case b = <-free:
					b = b[:0]
				default:
					b = make([]item, 0, aheadBatch)
				}
				return true
			}
			for rec, err := range seq {
				b = append(b, item{rec, err})
				if len(b) == aheadBatch && !send() {
					return
				}
			}
			if len(b) > 0 {
				send()
			}
		}()
		defer func() {
			close(stop)
			<-done
		}()
		for b := range full {
			for _, it := range b {
				if !yield(it.rec, it.err) {
					return
				}
			}
			clear(b) // the batch's records to the collector, not kept with it
			select {
			case free <- b:
			default:
			}
		}
	}
}
