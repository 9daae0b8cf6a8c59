//go:build peers

package testserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartPostgres brings up a private server that answers pgx, with fsync
// on, not as root; Stop ends it and removes its directory.
func TestPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pg, err := StartPostgres(ctx)
	if errors.Is(err, ErrMissing) {
		// Postgres is optional (only River's benchmark rows need it):
		// skipped, loudly, even under CI.
		msg := fmt.Sprintf("SKIPPED, SERVER MISSING: %v", err)
		fmt.Fprintln(os.Stderr, "*** "+msg)
		t.Skip(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			pg.Stop()
		}
	})
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	var fsync, user string
	var sum int
	if err := conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_user, $1::int + 1", 41).Scan(&fsync, &user, &sum); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if fsync != "on" || user != "postgres" || sum != 42 {
		t.Fatalf("fsync = %q, user = %q, 41 + 1 = %d", fsync, user, sum)
	}
	t.Logf("server ran as %s", pg.User)
	if os.Geteuid() == 0 && pg.User == "root" {
		t.Fatal("the server runs as root")
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if _, err := os.Stat(pg.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s after Stop: %v", pg.Dir, err)
	}
	if c, err := pgx.Connect(ctx, pg.URL); err == nil {
		c.Close(ctx)
		t.Fatal("the server still answers after Stop")
	}
}
