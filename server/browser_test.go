package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is the browser TestBrowser drives (Debian's package chromium).
const chromium = "/usr/bin/chromium"

// TestBrowser loads the dashboard in headless Chromium and watches it follow
// cycles over the event stream, without a reload, with and without a token.
// It runs when /usr/bin/chromium exists; otherwise it skips, or fails when
// ECHOSTORE_BROWSER_TEST=1 asks for it. With ECHOSTORE_SCREENSHOT=1 it writes
// the screenshot of the dashboard to docs/dashboard.png.
func TestBrowser(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("ECHOSTORE_BROWSER_TEST") == "1" {
			t.Fatalf("ECHOSTORE_BROWSER_TEST=1 but no browser: %v", err)
		}
		t.Skipf("SKIPPED: no %s (apt-get install chromium), so the dashboard is not tested in a browser; ECHOSTORE_BROWSER_TEST=1 makes this a failure", chromium)
	}

	t.Run("Seam", func(t *testing.T) {
		e := start(t, Config{})
		ctx := browser(t)
		q := queueName(t)
		key := q + "/s"
		mustDo(t, ctx, chromedp.Navigate(e.base+"/"))
		waitLive(t, ctx)

		appendN(e, q, "s", 0, 8)
		e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", "")
		waitRow(t, ctx, key, "6", "2")

		// The same page, not reloaded, follows the next cycle.
		appendN(e, q, "s", 8, 5)
		e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", "")
		waitRow(t, ctx, key, "11", "2")
		// The background replication pushes the archive volume (the
		// default replicate_every; the stream trims after local): its row
		// follows, through the volume's lane, to a remote LSN and no lag.
		waitVolume(t, ctx, "archive."+q+".s", "in sync")

		screenshot(t, ctx, false)
	})

	t.Run("ScrubAndFault", func(t *testing.T) {
		e := start(t, Config{Faults: true, Defaults: StreamConfig{Keep: 2}})
		ctx := browser(t)
		q := queueName(t)
		key := q + "/s"
		mustDo(t, ctx, chromedp.Navigate(e.base+"/"))
		waitLive(t, ctx)
		ids := appendN(e, q, "s", 0, 150)
		e.must("POST", "/v1/streams/"+q+"/s/cycle", "") // the stream's window: keep 2
		waitRow(t, ctx, key, "148", "2")

		// Scrub through the merged history: its start and the middle come
		// from the archive (pages read forward), the end across W from the
		// live tail (pages read backward).
		click(t, ctx, key, "scrub")
		for _, at := range []struct {
			pos  int
			side string
		}{{0, "archive"}, {70, "archive"}, {147, "archive"}, {148, "live"}, {120, "archive"}} { // 147 is W
			scrubTo(t, ctx, at.pos, ids[at.pos], at.side)
		}

		// The admin control arms a fault; the next cycle folds, skips its
		// trim (every record stays live) and says so; the one after trims.
		more := appendN(e, q, "s", 150, 4)
		click(t, ctx, key, "fault")
		waitCell(t, ctx, key, 6, "fault armed")
		click(t, ctx, key, "cycle")
		waitCell(t, ctx, key, 6, "folded 4, trim skipped (over-retention, nothing lost)")
		waitRow(t, ctx, key, "152", "6")
		// The scrubber follows the cycle: W moved, nothing left.
		scrubTo(t, ctx, 153, more[3], "live")
		scrubTo(t, ctx, 147, ids[147], "archive") // W and the live tail in view
		screenshot(t, ctx, true)
		click(t, ctx, key, "cycle")
		waitCell(t, ctx, key, 6, "folded 0, trimmed 4")
		waitRow(t, ctx, key, "152", "2")
	})

	t.Run("Token", func(t *testing.T) {
		e := start(t, Config{Token: testToken})
		ctx := browser(t)
		q := queueName(t)
		// Without a session the event stream is refused and the page asks
		// for the token; signing in gets the cookie and the page goes live.
		mustDo(t, ctx,
			chromedp.Navigate(e.base+"/"),
			chromedp.WaitVisible("#token"),
			chromedp.SendKeys("#token", testToken),
			chromedp.Click("#go"),
		)
		waitLive(t, ctx)

		appendN(e, q, "s", 0, 4)
		e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", "")
		waitRow(t, ctx, q+"/s", "2", "2")
	})

	t.Run("FragmentToken", func(t *testing.T) {
		// `make run` prints the dashboard's address as /#token=…: the page
		// signs in with the fragment (which no request carries), removes
		// it from the address bar and goes live without asking.
		e := start(t, Config{Token: testToken})
		ctx := browser(t)
		q := queueName(t)
		appendN(e, q, "s", 0, 4)
		e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", "")
		mustDo(t, ctx, chromedp.Navigate(e.base+"/#token="+testToken))
		waitLive(t, ctx)
		waitRow(t, ctx, q+"/s", "2", "2")
		if href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); err != nil || href != e.base+"/" {
			t.Fatalf("address after the sign-in: %q %v, want %q (the fragment removed)", href, err, e.base+"/")
		}

		// A wrong fragment: refused, removed too, and the prompt shows.
		ctx = browser(t)
		mustDo(t, ctx, chromedp.Navigate(e.base+"/#token=not-the-token-0123456789"))
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
			`!document.getElementById("auth").hidden && location.hash === ""`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ReadToken", func(t *testing.T) {
		// A read token signs the page in and shows the streams; the cycle
		// control it cannot use says which scope it needs.
		e := start(t, Config{Token: testToken, Tokens: scopedTokens()})
		ctx := browser(t)
		q := queueName(t)
		appendN(e, q, "s", 0, 4)
		e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", "")
		mustDo(t, ctx,
			chromedp.Navigate(e.base+"/"),
			chromedp.WaitVisible("#token"),
			chromedp.SendKeys("#token", readToken),
			chromedp.Click("#go"),
		)
		waitLive(t, ctx)
		waitRow(t, ctx, q+"/s", "2", "2")
		if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#streams button.fault").length`)); err != nil || n != 0 {
			t.Fatalf("fault controls without faults: true: %d %v", n, err)
		}
		click(t, ctx, q+"/s", "cycle")
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
			`document.getElementById("state").textContent.includes("write scope")`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("CrossSitePage", func(t *testing.T) {
		// Finding 1 in a browser: a page of another origin sends the
		// requests a page can send without a preflight (no-cors fetches
		// and a form, text/plain) and one with application/json (which
		// needs a preflight) to the reset and a cycle with a retention.
		// All are refused; the archive keeps every record.
		q := queueName(t)
		e := start(t, Config{Queues: []QueueConfig{{Name: q, Streams: []StreamConfig{{Name: "s", Keep: 2, TrimAfter: "local"}}}}})
		appendN(e, q, "s", 0, 10)
		e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=2", "")
		_, want := e.do("GET", "/v1/streams/"+q+"/s", "", nil)
		vid := "archive." + q + ".s"
		headOf := func() uint64 {
			t.Helper()
			st, err := e.srv.node.VolumeStatus(t.Context(), volName(vid))
			if err != nil {
				t.Fatal(err)
			}
			return st.LocalLSN
		}
		head := headOf()
		posts := requests(t, e, "POST", "")
		reset := e.base + "/v1/volumes/" + vid + "/reset?to_remote=true"
		page := `<!doctype html><html><body>
<form id="f" method="post" enctype="text/plain" target="sink" action="` + reset + `"><input name="x" value="y"></form>
<iframe name="sink"></iframe>
<script>
Promise.allSettled([
  fetch(` + "`" + reset + "`" + `, {method: "POST", mode: "no-cors", body: "x"}),
  fetch(` + "`" + e.base + "/v1/streams/" + q + "/s/cycle?keep=1&retain_count=1" + "`" + `, {method: "POST", mode: "no-cors", body: "x"}),
  fetch(` + "`" + reset + "`" + `, {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}),
]).then(() => { document.getElementById("f").submit(); document.title = "sent"; });
</script></body></html>`
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, page)
		}))
		defer evil.Close()
		ctx := browser(t)
		// The page's origin is another host name: cross-site, not only
		// cross-origin.
		mustDo(t, ctx, chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)))
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.title === "sent"`, chromedp.WithPollingTimeout(0))); err != nil {
			t.Fatal(err)
		}
		// The server saw them: three POSTs (two fetches, the form) and the
		// JSON fetch's preflight.
		deadline := time.Now().Add(time.Minute)
		for requests(t, e, "POST", "") < posts+3 || requests(t, e, "OPTIONS", "") < 1 {
			if time.Now().After(deadline) {
				t.Fatalf("the server saw %d POSTs and %d preflights from the page, want 3 and 1",
					requests(t, e, "POST", "")-posts, requests(t, e, "OPTIONS", ""))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if now := headOf(); now != head {
			t.Fatalf("the volume's head moved from %d to %d", head, now)
		}
		if code, got := e.do("GET", "/v1/streams/"+q+"/s", "", nil); code != 200 || string(got) != string(want) {
			t.Fatalf("merge-read after the page: %d\n%s\nwant\n%s", code, got, want)
		}
		// Each was refused at the boundary (403 for its Origin).
		if n := requests(t, e, "POST", "403") + requests(t, e, "POST", "415"); n != 3 {
			t.Fatalf("%d of the page's POSTs refused, want 3", n)
		}
	})
}

// browser starts a headless Chromium with a fresh profile for the test and
// returns its chromedp context; the test's end closes it (before the
// server's cleanup, which start registered earlier). The timeout only
// bounds a stuck test.
func browser(t *testing.T) context.Context {
	t.Helper()
	bound, cancelBound := context.WithTimeout(t.Context(), 2*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(bound,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 600),
	)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelCtx(); cancelAlloc(); cancelBound() })
	return ctx
}

func mustDo(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// waitLive waits until the page says its event stream is open.
func waitLive(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`document.getElementById("state").textContent === "live"`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
		state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("state").textContent`))
		t.Fatalf("page not live (state %q): %v", state, err)
	}
}

// waitRow waits until the streams table shows archive and live counts for
// the stream key (queue/stream); the browser watches the DOM for it.
func waitRow(t *testing.T, ctx context.Context, key, archive, live string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.PollFunction[bool](`(key, archive, live) => {
		for (const tr of document.querySelectorAll("#streams tr")) {
			const c = tr.cells;
			if (c[0].textContent === key) return c[2].textContent === archive && c[5].textContent === live;
		}
		return false;
	}`, chromedp.WithPollingArgs(key, archive, live),
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
		rows, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("streams").innerText`))
		t.Fatalf("stream %s: want archive %s, live %s; table:\n%s\n%v", key, archive, live, rows, err)
	}
}

// screenshot takes a screenshot of the page; with ECHOSTORE_SCREENSHOT=1
// the docs one goes to docs/dashboard.png.
func screenshot(t *testing.T, ctx context.Context, docs bool) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := filepath.Join(t.TempDir(), "dashboard.png")
	if docs && os.Getenv("ECHOSTORE_SCREENSHOT") == "1" {
		out = filepath.Join("..", "docs", "dashboard.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(png))
}

// click clicks the button of class cls in the stream's row.
//
// It finds and clicks the button in one step inside the page: the table is
// drawn again on every refresh, and a button found by one DevTools call
// can be gone by the next ("Could not find node with given id").
func click(t *testing.T, ctx context.Context, key, cls string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.PollFunction[bool](`(sel) => {
		const b = document.querySelector(sel);
		if (!b) return false;
		b.click();
		return true;
	}`, chromedp.WithPollingArgs(`#streams tr[data-key="`+key+`"] button.`+cls),
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
		t.Fatalf("click %s of stream %s: %v", cls, key, err)
	}
}

// waitCell waits until cell i of the stream's row contains text.
func waitCell(t *testing.T, ctx context.Context, key string, i int, text string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.PollFunction[bool](`(key, i, text) => {
		const tr = document.querySelector('#streams tr[data-key="' + key + '"]');
		return !!tr && tr.cells[i].textContent.includes(text);
	}`, chromedp.WithPollingArgs(key, i, text),
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
		rows, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("streams").innerText`))
		t.Fatalf("stream %s: cell %d never showed %q; table:\n%s\n%v", key, i, text, rows, err)
	}
}

// waitVolume waits until the volume's row of the volume table shows a
// remote LSN above 0 and its replication lag cell holds text.
func waitVolume(t *testing.T, ctx context.Context, vol, text string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.PollFunction[bool](`(vol, text) => {
		const tr = document.querySelector('#volumes tr[data-volume="' + vol + '"]');
		return !!tr && Number(tr.cells[2].textContent) > 0 && tr.cells[3].textContent.includes(text);
	}`, chromedp.WithPollingArgs(vol, text),
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
		rows, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("volumes").innerText`))
		t.Fatalf("volume %s: never a remote LSN and %q; table:\n%s\n%v", vol, text, rows, err)
	}
}

// scrubTo drags the scrubber to pos (as a user's drag does: the value
// changes and an input event fires) and waits until the first row of the
// history shows a record whose id starts with id, on side.
func scrubTo(t *testing.T, ctx context.Context, pos int, id, side string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		const el = document.getElementById("scrub-pos");
		el.value = %d; el.dispatchEvent(new Event("input")); return true; })()`, pos))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.PollFunction[bool](`(pos, id, side) => {
		const tr = document.querySelector("#scrub-rows tr");
		return !!tr && tr.cells[0].textContent === String(pos + 1) && tr.cells[1].textContent.startsWith(id) && tr.cells[2].textContent === side;
	}`, chromedp.WithPollingArgs(pos, id, side),
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
		rows, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("scrub").innerText`))
		t.Fatalf("scrubbed to %d: want %s… on the %s side; scrubber:\n%s\n%v", pos, id, side, rows, err)
	}
}

// requests sums the requests /metrics counts with method and, unless "",
// status code.
func requests(t *testing.T, e *env, method, code string) int {
	t.Helper()
	_, b := e.do("GET", "/metrics", e.cfg.Token, nil)
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "echostore_http_request_duration_seconds_count{") || !strings.Contains(l, `method="`+method+`"`) ||
			(code != "" && !strings.Contains(l, `code="`+code+`"`)) {
			continue
		}
		_, v, _ := strings.Cut(l, "} ")
		c, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", l, err)
		}
		n += c
	}
	return n
}
