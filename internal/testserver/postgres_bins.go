package testserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
)

// PostgresBins are the server programs StartPostgres runs.
type PostgresBins struct {
	InitDB   string // the initdb program, which makes the cluster
	Postgres string // the postgres server program
}

// PostgresBinaries finds initdb and postgres: in $ECHOSTORE_POSTGRES_BIN (a
// folder), on PATH, or in the newest /usr/lib/postgresql/N/bin (Debian's
// layout). It returns an error wrapping ErrMissing with the command that
// installs them.
func PostgresBinaries() (PostgresBins, error) {
	var dirs []string
	if d := os.Getenv("ECHOSTORE_POSTGRES_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int { return pgVersion(b) - pgVersion(a) })
	dirs = append(dirs, versions...)
	for _, d := range dirs {
		b := PostgresBins{InitDB: filepath.Join(d, "initdb"), Postgres: filepath.Join(d, "postgres")}
		if isExec(b.InitDB) && isExec(b.Postgres) {
			return b, nil
		}
	}
	return PostgresBins{}, fmt.Errorf("postgres and initdb: %w (install them: apt-get install -y postgresql, or bash scripts/deps.sh postgres)", ErrMissing)
}

// pgVersion is N of /usr/lib/postgresql/N/bin (0 if it is not a number).
func pgVersion(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
