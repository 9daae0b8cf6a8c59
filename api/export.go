package api

// An export as the API carries it: the Parquet files of a stream and
// their manifest (echostore.Node.Export, docs/EXPORT.md).

// ExportManifest is the name of the manifest in an export's folder, or
// the last segment of its key in the remote bucket.
const ExportManifest = "manifest.json"

// ExportFile describes one file of an export, in its manifest.
type ExportFile struct {
	// Name is the file's name in the folder: part-<ms>-<seq>.parquet after
	// the Redis id of its last record, zero-padded so that the names sort
	// in id order.
	Name string `json:"name"`
	Rows int64  `json:"rows"`
	// FirstID and LastID are its first and last records' ids (as printed),
	// FirstRedisID and LastRedisID their Redis ids.
	FirstID      string `json:"first_id"`
	LastID       string `json:"last_id"`
	FirstRedisID string `json:"first_redis_id"`
	LastRedisID  string `json:"last_redis_id"`
	// Typed are its typed columns (f_<name>), by name.
	Typed []ExportColumn `json:"typed"`
}

// ExportColumn is one typed column of a file: the field it holds and its
// type, "int64", "double" or "string".
type ExportColumn struct {
	Field string `json:"field"`
	Type  string `json:"type"`
}

// ExportManifestFile is the manifest of an export's folder: the stream, the
// files in id order, and the watermark of the export: the Redis id of the
// last record written (null before any).
type ExportManifestFile struct {
	Format    int          `json:"format"`
	Queue     string       `json:"queue,omitempty"`
	Stream    string       `json:"stream,omitempty"`
	Key       string       `json:"key,omitempty"`
	Watermark *string      `json:"watermark"`
	Files     []ExportFile `json:"files"`
}

// ExportResult is the answer of an export: the files it wrote (none when
// nothing came after the last export), the records in them, the watermark
// it resumed after (null: the first export) and the manifest's path.
type ExportResult struct {
	Files        []ExportFile `json:"files"`
	Rows         int64        `json:"rows"`
	ResumedAfter *string      `json:"resumed_after"`
	Watermark    *string      `json:"watermark"`
	Manifest     string       `json:"manifest"`
}

// ExportProgress is how far an export has come.
type ExportProgress struct {
	Rows  int64  // records written by this export
	Files int    // files written by this export
	Last  string // the id of the last record written
}

// ExportBody is the body of POST /v1/streams/{q}/{s}/export and of
// POST /v1/keys/{k}/export: the export of the stream into serve's remote
// bucket, under exports/<its volume>/. To is the highest id exported,
// inclusive (EVT_… or a Redis id; "": all, the live tail included);
// RowsPerFile the most records in one file (0: the default, 1,048,576).
// The answer is an ExportResult.
type ExportBody struct {
	To          string `json:"to,omitempty"`
	RowsPerFile int    `json:"rows_per_file,omitempty"`
}
