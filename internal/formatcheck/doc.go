// Package formatcheck proves that docs/FORMAT.md is enough on its own for a
// reader in another language. reader.py is an independent reader of the
// archive written from that document alone (Python 3, standard library and
// zstandard): it opens a file:// remote, folds an archive volume's log and
// prints the archived stream's records as JSON lines. The package's test
// drives the echostore binary (append, cycle, retention, checkpoint, log
// trimming, push) and compares the reader's output with `echostore stream
// read --archive-only` byte for byte. TestReaderKeyStreamVolume has the
// archive code itself (an archive.Archiver cycle, pushed to a file://
// remote) write the volume of a stream at a Redis key, owner "{key}"+K,
// holding pair-form records (repeated names, bytes that are not UTF-8)
// and a 3 MiB entry spanning pages, and compares reader.py's lines with
// the records as written, rendered by mq.AppendJSONAs. sealed.py is an independent reader of
// the sealed envelopes of encryption at rest, written from FORMAT.md's
// "Sealed objects" alone (Python 3 and Debian's python3-cryptography):
// TestPythonOpensSealedObjects checks it against the golden vector and a
// sealed remote. The package has no Go API.
package formatcheck
