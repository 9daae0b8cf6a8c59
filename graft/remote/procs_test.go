package remote

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/echostore/echostore/names"
)

// childPusher appends to volume PUSH_VOLUME of the store at PUSH_URL until
// it has won PUSH_COUNT commits, after the parent says go, printing
// "won <lsn> <hash>" for each and "lost <n>" at the end.
func childPusher() error {
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv("PUSH_URL"), testDrivers...)
	if err != nil {
		return err
	}
	defer s.Close()
	vol, err := names.ParseVolume(os.Getenv("PUSH_VOLUME"))
	if err != nil {
		return err
	}
	l, err := NewLog(s, vol)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(os.Getenv("PUSH_COUNT"))
	if err != nil {
		return err
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	lost, err := pushWins(ctx, l, n, os.Getenv("PUSH_ID"), func(e Entry) {
		fmt.Fprintf(w, "won %d %s\n", e.LSN(), e.Hash)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "lost %d\n", lost)
	return w.Flush()
}

// TestTwoWriterProcesses: two processes push one volume's log at once on
// file:// and on MinIO. Every LSN is won by exactly one of them, each
// reported hash is the commit at its LSN, and the chain verifies.
//
//echostore:fault
func TestTwoWriterProcesses(t *testing.T) {
	for name, open := range map[string]func(testing.TB) (Store, string){"file": fileStore, "s3": minioStore} {
		t.Run(name, func(t *testing.T) {
			s, url := open(t)
			const each = 20
			type proc struct {
				in   io.WriteCloser
				out  *bufio.Reader
				wait func() error
			}
			var ps []proc
			for w := range 2 {
				cmd := child(t, "pusher", "PUSH_URL="+url, "PUSH_VOLUME=vol.p",
					fmt.Sprint("PUSH_COUNT=", each), fmt.Sprint("PUSH_ID=proc ", w))
				in, _ := cmd.StdinPipe()
				out, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cmd.Process.Kill() })
				ps = append(ps, proc{in, bufio.NewReader(out), cmd.Wait})
			}
			for _, p := range ps {
				if l, err := p.out.ReadString('\n'); err != nil || l != "ready\n" {
					t.Fatalf("child said %q, %v", l, err)
				}
			}
			for _, p := range ps {
				io.WriteString(p.in, "go\n")
			}
			won := map[uint64]string{}
			for w, p := range ps {
				for {
					line, err := p.out.ReadString('\n')
					if err != nil {
						t.Fatalf("writer %d: %v", w, err)
					}
					f := strings.Fields(line)
					if f[0] == "lost" {
						t.Logf("writer %d lost %s races", w, f[1])
						break
					}
					lsn, _ := strconv.ParseUint(f[1], 10, 64)
					if _, dup := won[lsn]; dup {
						t.Fatalf("lsn %d won twice", lsn)
					}
					won[lsn] = f[2]
				}
				if err := p.wait(); err != nil {
					t.Fatalf("writer %d: %v", w, err)
				}
			}
			l := mustLog(t, s, "vol.p")
			oldest, head, err := l.Check(context.Background())
			if err != nil || oldest != 1 || head != 2*each || len(won) != 2*each {
				t.Fatalf("log %d..%d (%v), %d wins", oldest, head, err, len(won))
			}
			for lsn, h := range won {
				e, err := l.Read(context.Background(), lsn)
				if err != nil || e.Hash.String() != h {
					t.Fatalf("lsn %d: %v, reported %s", lsn, err, h)
				}
			}
		})
	}
}
