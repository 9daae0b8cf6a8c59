// Package guidetest runs docs/BRING-YOUR-OWN-STREAMS.md as a test: the
// guide's marked blocks are executed, in order, against a private
// redis-server and a freshly built echostore binary, and each command's
// output is compared with the lines the guide shows under it.
//
// The guide marks what the test takes with HTML comments on the line before
// a fenced block:
//
//	<!-- guide: file NAME -->   the block is written to the file NAME
//	<!-- guide: run -->         the block's "$ command" lines are run
//	<!-- guide: run needs=key-replay -->
//	                            run only when the binary's
//	                            "stream replay --help" offers --key (the
//	                            steps that need the RESP front's and
//	                            replay's key streams); skipped, and logged,
//	                            otherwise, and a failure when CI=true
//
// In a run block each line starting "$ " is one command, run with
// bash -c in the guide's working directory; the lines after it, up to the
// next command, are its expected output (stdout and stderr together,
// trailing spaces and blank lines ignored). In an expected line "…" stands
// for any run of characters (ids, times, LSNs that differ per run); a line
// that is only "…" stands for any number of lines. A last line
// "[exit N]" expects the command to exit with status N; without it the
// command must exit 0.
//
// The test puts two small wrappers first on PATH so that the guide can show
// the default addresses: redis-cli goes to the private redis-server, and
// "redis-cli -p 6380" to serve's RESP front on its private port; python3 is
// the python3 that imports redis-py (installed by testserver.PythonRedis).
// echostore finds Redis, its listen address and its RESP address through
// ECHOSTORE_REDIS, ECHOSTORE_LISTEN and ECHOSTORE_RESP, the producer
// through REDIS_URL and the redis-py reader of the front through RESP_URL.
//
// The binary is built from this module; GUIDE_ECHOSTORE=/path/to/echostore
// runs the guide with a binary built elsewhere instead (an absolute path).
package guidetest
