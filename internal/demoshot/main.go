// Command demoshot takes the README's screenshot of the console: it opens
// the dashboard address `make run` prints (with its #token= fragment) in
// headless Chromium, waits until the page is live and its charts hold a
// minute of samples, and writes a PNG of the whole page; then, with the
// demo stream's history open, a PNG of each view (charts, queues, jobs,
// streams, history, volumes, nodes) into the directory given third, as
// console-VIEW.png.
//
//	go run ./internal/demoshot 'http://127.0.0.1:7070/#token=…' docs/dashboard.png docs
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	if len(os.Args) != 3 && len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: demoshot DASHBOARD-URL OUT.png [VIEWS-DIR]")
		os.Exit(2)
	}
	views := ""
	if len(os.Args) == 4 {
		views = os.Args[3]
	}
	if err := shoot(os.Args[1], os.Args[2], views); err != nil {
		fmt.Fprintln(os.Stderr, "demoshot:", err)
		os.Exit(1)
	}
}

func shoot(url, out, views string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath("/usr/bin/chromium"), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.WindowSize(1280, 900))
	defer cancelAlloc()
	bctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		return err
	}
	// Live, with a minute of samples and the demo stream's row.
	ready := `document.getElementById("state").textContent === "live" && samples.length > 0 &&
		samples[samples.length - 1].t - samples[0].t >= 60000 && document.querySelectorAll("#streams tr").length > 0`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](ready, chromedp.WithPollingInterval(time.Second), chromedp.WithPollingTimeout(0))); err != nil {
		return fmt.Errorf("the page never showed a minute of samples: %w", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const b = document.querySelector('#queues tr[data-queue="demo"] button.jobs'); if (b) b.click(); setTimeout(() => { const p = document.querySelector("#job-tabs button.tab-pending"); if (p) p.click(); }, 300); return true; })()`)); err != nil {
		return err
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("jobs-at").textContent.includes("pending") && document.querySelectorAll("#job-rows tr").length > 0`, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		return fmt.Errorf("the demo queue's jobs never showed: %w", err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		return err
	}
	if views == "" {
		return nil
	}
	// The first stream's history, for the history view.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const b = document.querySelector("#streams tr button.scrub"); if (b) b.click(); return !!b; })()`)); err != nil {
		return err
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("scrub-at").textContent.startsWith("records")`, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		return fmt.Errorf("the demo stream's history never showed: %w", err)
	}
	for _, v := range []string{"charts", "queues", "jobs", "streams", "history", "volumes", "nodes"} {
		png, err := chromedp.Run(bctx, chromedp.Screenshot(chromedp.ID("view-"+v)))
		if err != nil {
			return fmt.Errorf("view %s: %w", v, err)
		}
		if err := os.WriteFile(filepath.Join(views, "console-"+v+".png"), png, 0o644); err != nil {
			return err
		}
	}
	return nil
}
