package client

import (
	"context"
	"net/http"

	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/names"
)

// ExportRemote exports the stream into serve's remote bucket, under
// exports/<its volume>/ (POST /v1/streams/{q}/{s}/export, or
// POST /v1/keys/{k}/export when ref is a stream at a key), as Node.Export
// with ExportOptions.Remote does: the records after the last export's
// watermark, up to b.To. An encrypted remote answers 409 (CodeConflict).
// To export to a folder of this machine, use echostore.ExportFrom with
// Read.
func (c *Client) ExportRemote(ctx context.Context, ref names.StreamRef, b api.ExportBody) (api.ExportResult, error) {
	var res api.ExportResult
	err := c.call(ctx, request{method: http.MethodPost, path: streamPath(ref, "/export"), body: b}, &res)
	return res, err
}
