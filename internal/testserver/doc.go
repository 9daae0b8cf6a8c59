// Package testserver starts the real servers that echostore's tests talk to:
// a private redis-server (plain, or with AOF and appendfsync always), a
// 3-master Redis Cluster, and a private MinIO, each on free loopback ports, in
// a temporary directory, stopped when the test package ends. StartPostgres
// starts a private PostgreSQL (initdb into a temporary directory, trust
// authentication, fsync on), for the benchmark's River rows; as root it runs
// the server as the "postgres" user, or "nobody", since initdb and postgres
// refuse root.
//
// A test package declares one Pool and runs its tests through it:
//
//	var servers testserver.Pool
//
//	func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }
//
//	func TestX(t *testing.T) { r := servers.Redis(t); … r.URL … }
//
// The Pool starts each server on first use and stops all of them after the
// last test. Tests that must stop, kill or restart a server start their own
// with StartRedis or StartMinIO and stop it with t.Cleanup.
//
// When a server binary is missing, a test that needs it fails if the
// environment variable CI is "true" and is skipped with a loud message
// otherwise. Binaries are found on PATH; MinIO also in $ECHOSTORE_MINIO and in
// the cache folder that .ci/run builds it into ($XDG_CACHE_HOME or
// ~/.cache, then echostore/bin). Postgres's initdb and postgres are found in
// $ECHOSTORE_POSTGRES_BIN, on PATH, or in /usr/lib/postgresql/N/bin; a test
// that finds them missing is skipped, under CI too (Postgres is optional).
package testserver
