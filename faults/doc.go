// Package faults holds echostore's fault suite and its soak, as tests: real
// redis-server and MinIO processes, real child processes killed with SIGKILL,
// a full disk, a failing object store, corrupt and truncated files and
// objects. Every case ends with an audit of what was kept: each acknowledged
// record and job is present, exactly once where the design promises it.
//
//	make faults                 # the suite, a few minutes
//	make soak SOAK=10m          # mixed load with random faults, then the audit
//
// docs/RELIABILITY.md lists the promises, the tests that prove each one and
// the figures of the last runs. The package has no code outside its tests.
package faults
