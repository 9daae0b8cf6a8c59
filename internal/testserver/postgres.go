//go:build peers

package testserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a running private PostgreSQL server: a cluster made by initdb
// in a new temporary directory, listening on a free loopback port and on a
// Unix socket in that directory, with trust authentication for the
// superuser "postgres". Its durability settings are Postgres's defaults
// (fsync on, synchronous_commit on, full_page_writes on): a commit is
// acknowledged once its WAL is fsync'd.
type Postgres struct {
	// URL is "postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable".
	URL string
	// Port is the TCP port.
	Port int
	// Dir holds the data directory (Dir/data), the socket and the log.
	Dir string
	// User is the operating-system user the server runs as: this
	// process's, or, when this process is root (which initdb and postgres
	// refuse), "postgres" or else "nobody".
	User string

	bins PostgresBins
	cred *syscall.Credential // nil: run as this process's user
	proc *proc
}

// serverUser returns who the server runs as. As root, it is the "postgres"
// user if the system has one, else "nobody"; otherwise this process's user
// (cred nil).
func serverUser() (name string, cred *syscall.Credential, err error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return strconv.Itoa(os.Geteuid()), nil, nil
		}
		return u.Username, nil, nil
	}
	for _, n := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(n)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return n, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return "", nil, errors.New("postgres: running as root and the system has neither a postgres nor a nobody user to run the server as (initdb and postgres refuse root)")
}

// StartPostgres runs initdb into a new temporary directory and starts the
// server on a free loopback port, waiting until it answers a query. The
// cluster's files are written without initdb's final fsync (--no-sync: a
// scratch cluster need not survive a crash of the machine while it is
// made); the running server keeps Postgres's durable defaults.
func StartPostgres(ctx context.Context) (*Postgres, error) {
	bins, err := PostgresBinaries()
	if err != nil {
		return nil, err
	}
	name, cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "echostore-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres dir: %w", err)
	}
	pg := &Postgres{Dir: dir, User: name, bins: bins, cred: cred}
	if err := pg.initdb(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if pg.Port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		pg.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.Port)
		if lastErr = pg.start(ctx); lastErr == nil {
			return pg, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// initdb makes the cluster in Dir/data, Dir owned by the server's user.
func (pg *Postgres) initdb(ctx context.Context) error {
	if pg.cred != nil {
		if err := os.Chown(pg.Dir, int(pg.cred.Uid), int(pg.cred.Gid)); err != nil {
			return fmt.Errorf("postgres dir: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, pg.bins.InitDB, "-D", filepath.Join(pg.Dir, "data"), "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = pg.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "HOME="+pg.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: pg.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb as %s: %w\n%s", pg.User, err, out)
	}
	return nil
}

func (pg *Postgres) start(ctx context.Context) error {
	args := []string{"-D", filepath.Join(pg.Dir, "data"),
		"-p", strconv.Itoa(pg.Port),
		"-k", pg.Dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=300",
		// Postgres's defaults, stated: a commit waits for its WAL fsync.
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
		"-c", "full_page_writes=on",
		"-c", "logging_collector=off",
	}
	p, err := startProcAs(pg.bins.Postgres, args, pg.Dir, "postgres.log", []string{"LC_ALL=C"}, pg.cred)
	if err != nil {
		return err
	}
	err = waitReady(ctx, p, "postgres on 127.0.0.1:"+strconv.Itoa(pg.Port), func(ctx context.Context) error {
		return pg.ping(ctx)
	})
	if err != nil {
		pg.kill(p)
		return err
	}
	pg.proc = p
	return nil
}

// ping connects and runs SELECT 1.
func (pg *Postgres) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return fmt.Errorf("SELECT 1 answered %d", one)
	}
	return nil
}

// kill ends p and every process of its group (the postmaster's backends).
func (pg *Postgres) kill(p *proc) {
	_ = p.stop(syscall.SIGKILL, 5*time.Second)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// Stop shuts the server down (a fast shutdown: SIGINT; SIGKILL after 15 s)
// and removes its directory.
func (pg *Postgres) Stop() error {
	var err error
	if p := pg.proc; p != nil {
		pg.proc = nil
		if err = p.stop(syscall.SIGINT, 15*time.Second); err != nil {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	if rmErr := os.RemoveAll(pg.Dir); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
		err = fmt.Errorf("postgres: remove %s: %w", pg.Dir, rmErr)
	}
	return err
}

// Version returns the server's version string (SHOW server_version).
func (pg *Postgres) Version(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		return "", fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", fmt.Errorf("postgres: server_version: %w", err)
	}
	return strings.TrimSpace(v), nil
}
