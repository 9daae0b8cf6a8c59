package server

import (
	"errors"
	"fmt"
	"net/http"

	echostore "github.com/echostore/echostore"
	"github.com/echostore/echostore/api"
	"github.com/echostore/echostore/mq"
	"github.com/echostore/echostore/xid"
	jsonv2 "github.com/go-json-experiment/json"
)

// handleExport exports the stream into serve's remote bucket
// (Node.Export with ExportOptions.Remote, api.ExportBody, or no body
// for its defaults): the files
// after the last export's watermark, and the manifest. Admin scope (it
// writes into the bucket). A body that does not parse is 400; an
// encrypted remote is 409 conflict, before anything is written; an
// export that serve's shutdown stopped is 503 (the files put stay, and
// the next export goes on after them).
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) error {
	ref, err := streamPath(r)
	if err != nil {
		return err
	}
	var b api.ExportBody
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if len(body) > 0 { // no body: the defaults
		if err := jsonv2.Unmarshal(body, &b, jsonv2.RejectUnknownMembers(true)); err != nil {
			return badRequest("body: %s", bodyError(err))
		}
	}
	opts := echostore.ExportOptions{Remote: true, RowsPerFile: b.RowsPerFile, To: xid.Max}
	if b.To != "" {
		if opts.To, err = mq.ParseID(b.To, true); err != nil {
			return badRequest("to: %w", err)
		}
	}
	if b.RowsPerFile < 0 {
		return badRequest("rows_per_file %d: want 1 or more (0: %d)", b.RowsPerFile, echostore.DefaultExportRows)
	}
	ctx, cancel := s.untilShutdown(r.Context())
	defer cancel()
	res, err := s.node.Export(ctx, ref, opts)
	queue, stream := refLabels(ref)
	s.log.Info("serve: export", "queue", queue, "stream", stream, "rows", res.Rows, "files", len(res.Files), "err", err)
	switch {
	case errors.Is(err, echostore.ErrExportSealed), errors.Is(err, echostore.ErrExportMismatch):
		return &apiError{http.StatusConflict, CodeConflict, err}
	case err != nil && r.Context().Err() == nil && ctx.Err() != nil:
		return &apiError{http.StatusServiceUnavailable, CodeUnavailable, fmt.Errorf("serve is shutting down: %w", err)}
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
