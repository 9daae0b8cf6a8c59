// Package formatcheck proves that docs/FORMAT.md is enough on its own for a
// reader in another language. reader.py is an independent reader of the
// archive written from that document alone (Python 3, standard library and
// zstandard): it opens a file:// remote, folds an archive volume's log and
// prints the archived stream's records as JSON lines. The package's test
// drives the echostore binary (append, cycle, retention, checkpoint, log
// trimming, push) and compares the reader's output with `echostore stream
// read --archive-only` byte for byte. The package has no Go API.
package formatcheck
