package all

import (
	"context"

	"github.com/echostore/echostore/cmd/echostore-bench/internal/acceptbench"
	"github.com/echostore/echostore/internal/bench"
)

// AcceptReport is the outbox suite: acceptbench.Bench's results (which hold the
// seed's published figures and the seed's whole-snapshot algorithm measured
// in the same run) and the options it ran with.
type AcceptReport struct {
	Options struct {
		N           int   `json:"n"`
		Ks          []int `json:"ks"`
		PayloadSize int   `json:"payload_bytes"`
		Runs        int   `json:"runs"`
	} `json:"options"`
	Results acceptbench.Results `json:"results"`
}

func acceptSteps(o acceptbench.BenchOptions) int { return o.Steps() }

func runAccept(ctx context.Context, dir string, opts acceptbench.BenchOptions, p *bench.Progress) (*AcceptReport, error) {
	opts.Progress = p.Step
	res, err := acceptbench.Bench(ctx, dir, opts)
	if err != nil {
		return nil, err
	}
	r := &AcceptReport{Results: res}
	r.Options.N, r.Options.Ks, r.Options.PayloadSize, r.Options.Runs = res.N, opts.Ks, opts.PayloadSize, res.Runs
	return r, nil
}
