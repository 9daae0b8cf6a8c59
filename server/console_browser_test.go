package server

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// colorScheme makes the page's prefers-color-scheme light or dark.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return chromedp.Void{}, err
	}
}

// waitJS waits (the browser watches the DOM) until the expression is true.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(0))); err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%s: never true: %s\npage:\n%s\n%v", what, expr, page, err)
	}
}

// press focuses sel and presses Enter on it: the control works from the
// keyboard.
func press(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	mustDo(t, ctx, chromedp.Focus(sel), chromedp.KeyEvent(kb.Enter))
}

// deadLetters makes n jobs of q dead letters: each put on the job stream,
// then claimed with stalled=1ms until its attempts are used up.
func deadLetters(t *testing.T, e *env, q string, n int) {
	t.Helper()
	for range n {
		putJob(t, e, q)
	}
	var dead int64
	for deadline := time.Now().Add(30 * time.Second); dead < int64(n); {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d dead letters", dead, n)
		}
		var r struct{ Dead int64 }
		if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?consumer=stall&count=10&stalled=1ms", ""), &r); err != nil {
			t.Fatal(err)
		}
		dead += r.Dead
	}
}

// TestBrowserConsole: the console's queue view, job browser and live
// charts render a real serve's data and follow it without a reload (an
// enqueue, a claim, appends and a cycle); its controls work from the
// keyboard; the dead letters are redriven and deleted (the delete only on a
// second press); light and dark follow prefers-color-scheme. With
// ECHOSTORE_SCREENSHOT=1 it writes docs/console.png.
func TestBrowserConsole(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("ECHOSTORE_BROWSER_TEST") == "1" {
			t.Fatalf("ECHOSTORE_BROWSER_TEST=1 but no browser: %v", err)
		}
		t.Skipf("SKIPPED: no %s (apt-get install chromium)", chromium)
	}
	e := start(t, Config{SampleEvery: 100 * time.Millisecond})
	ctx := browser(t)
	q := queueName(t)
	mustDo(t, ctx, colorScheme("light"), chromedp.Navigate(e.base+"/"))
	waitLive(t, ctx)

	// An enqueue shows in the queue's row (ready), a claim moves it to
	// in flight; the page is not reloaded.
	e.must("POST", "/v1/queues/"+q+"/jobs", `{"payload":{"task":"resize","size":"`+string(make([]byte, 0))+`large-payload-`+"0123456789012345678901234567890123456789012345678901234567890123456789"+`"}}`)
	row := `document.querySelector('#queues tr[data-queue="` + q + `"]')`
	waitJS(t, ctx, "the queue's row shows the ready job", row+`?.cells[1].textContent === "1"`)
	e.must("POST", "/v1/queues/"+q+"/claim?consumer=worker-1", "")
	waitJS(t, ctx, "the claim moves it to in flight", row+`?.cells[1].textContent === "0" && `+row+`.cells[2].textContent === "1"`)

	// A sync enqueue: the row gains the accept tier's side (the commit's
	// batch size, the sync latency).
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":{"task":"sync"}}`)
	waitJS(t, ctx, "the row shows the tier's commits and sync latency",
		row+`?.cells[8].textContent === "0" && /^[0-9]+( · [0-9]+)*$/.test(`+row+`.cells[9].textContent) && / ms$/.test(`+row+`.cells[10].textContent)`)

	// The job browser, from the keyboard: the pending job with its
	// consumer and its payload, truncated and expandable.
	press(t, ctx, `#queues tr[data-queue="`+q+`"] button.jobs`)
	waitJS(t, ctx, "the job browser opens", `!document.getElementById("jobs").hidden`)
	press(t, ctx, `#job-tabs button.tab-pending`)
	waitJS(t, ctx, "the pending job lists its consumer", `[...document.querySelectorAll("#job-rows tr")].some(tr => tr.cells[3].textContent.startsWith("worker-1, idle"))`)
	waitJS(t, ctx, "a long payload is truncated and expandable", `!!document.querySelector("#job-rows details summary")`)

	// Dead letters (the stalled claims make the pending job one too): one
	// redriven, one deleted on the second press.
	deadLetters(t, e, q, 2)
	var st struct{ Dead int64 }
	if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q, ""), &st); err != nil || st.Dead < 2 {
		t.Fatalf("queue status: %+v %v, want at least 2 dead letters", st, err)
	}
	dead := func(n int64) string { return row + `?.cells[5].textContent === "` + strconv.FormatInt(n, 10) + `"` }
	listed := func(n int64) string {
		return `document.querySelectorAll("#job-rows tr").length === ` + strconv.FormatInt(n, 10)
	}
	waitJS(t, ctx, "the row counts the dead letters", dead(st.Dead))
	waitJS(t, ctx, "the row counts the retried deliveries", row+`?.cells[4].textContent !== "0"`)
	press(t, ctx, `#job-tabs button.tab-dead`)
	waitJS(t, ctx, "the dead tab lists them", listed(st.Dead))
	press(t, ctx, `#job-rows tr:first-child button.redrive`)
	waitJS(t, ctx, "the redrive leaves one fewer", dead(st.Dead-1))
	waitJS(t, ctx, "the dead tab lists one fewer", listed(st.Dead-1))
	press(t, ctx, `#job-rows tr:first-child button.delete`)
	waitJS(t, ctx, "the first press only asks", `document.querySelector("#job-rows button.delete").textContent.includes("again")`)
	var now struct{ Dead int64 }
	if err := json.Unmarshal(e.must("GET", "/v1/queues/"+q, ""), &now); err != nil || now.Dead != st.Dead-1 {
		t.Fatalf("after the first press: %+v %v, want the dead letter kept", now, err)
	}
	press(t, ctx, `#job-rows tr:first-child button.delete`)
	waitJS(t, ctx, "the second press deletes it", dead(st.Dead-2))

	// The charts fill from the samples: appends and a cycle show as rates.
	appendN(e, q, "s", 0, 40)
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=5", "")
	waitJS(t, ctx, "the records chart draws appends and folds",
		`document.querySelector('#chart-records polyline[data-key="appends"]').getAttribute("points").split(" ").length >= 2 && `+
			`[...document.querySelectorAll("#chart-records .legend span")].every(s => !s.textContent.endsWith("—"))`)
	waitJS(t, ctx, "the memory chart shows Redis's used memory", `/used: [0-9.]+$/.test(document.querySelector('#chart-memory .legend span[data-key="redis_used_memory"]').textContent)`)
	waitJS(t, ctx, "the object store chart shows its requests", `/^requests: [0-9.]+$/.test(document.querySelector('#chart-remote .legend span[data-key="remote_requests"]').textContent)`)

	// Nodes: this node, its heartbeat in its group, and the stream it
	// cycles (alone, all of them).
	waitJS(t, ctx, "the nodes table shows this node with its heartbeat and its streams",
		`(() => { const tr = [...document.querySelectorAll("#nodes tr")].find(tr => tr.cells[0].textContent.endsWith("(this node)"));
		return !!tr && / s left$/.test(tr.cells[4].textContent) && tr.cells[5].textContent.includes(`+strconv.Quote("/v1/streams/"+q+"/s")+`); })()`)

	// Light and dark follow the system's scheme.
	bg := `getComputedStyle(document.body).backgroundColor`
	waitJS(t, ctx, "light background", bg+` === "rgb(255, 255, 255)"`)
	screenshot(t, ctx, false)
	if os.Getenv("ECHOSTORE_SCREENSHOT") == "1" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../docs/console.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustDo(t, ctx, colorScheme("dark"))
	waitJS(t, ctx, "dark background", bg+` === "rgb(21, 23, 26)"`)
}

// TestBrowserStreamDetail: a stream at any Redis key is listed and
// scrubbed like the others; the history is found by time range and from an
// id; the stream's consumer groups show with their pending entries, lag and
// the last cycle's verdict, and the stream's row counts its stalled groups.
func TestBrowserStreamDetail(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("ECHOSTORE_BROWSER_TEST") == "1" {
			t.Fatalf("ECHOSTORE_BROWSER_TEST=1 but no browser: %v", err)
		}
		t.Skipf("SKIPPED: no %s (apt-get install chromium)", chromium)
	}
	e := start(t, Config{})
	ctx := browser(t)
	q := queueName(t)
	mustDo(t, ctx, chromedp.Navigate(e.base+"/"))
	waitLive(t, ctx)

	// A stream at a key of the application's own, with a slash in it.
	keyPath := "/v1/keys/" + url.PathEscape("orders/"+q)
	for i := range 6 {
		e.must("POST", keyPath, `{"fields":{"n":"`+strconv.Itoa(i)+`"}}`)
	}
	e.must("POST", keyPath+"/cycle?keep=2", "")
	keyName := `key "orders/` + q + `"`
	waitRow(t, ctx, keyName, "4", "2")
	// Its name has quotes: the row is found by comparing data-key, not by
	// a selector.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { for (const tr of document.querySelectorAll("#streams tr"))
		if (tr.dataset.key === `+strconv.Quote(keyName)+`) { tr.querySelector("button.scrub").click(); return true; } return false; })()`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the key stream's history", `document.getElementById("scrub-at").textContent.startsWith("records 1–6 of 6")`)
	// Its export into the bucket: the six records, and where they went.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { for (const tr of document.querySelectorAll("#streams tr"))
		if (tr.dataset.key === `+strconv.Quote(keyName)+`) { tr.querySelector("button.export").click(); return true; } return false; })()`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the export's answer", `/^exported 6 records of .* in 1 files: exports\/archive-key.*\/manifest\.json$/.test(document.getElementById("state").textContent)`)

	// A stream of a queue with a consumer group that stalls.
	ids := appendN(e, q, "s", 0, 20)
	newConsumerGroup(t, e, q, "s", "billing").read(3, false)
	e.must("POST", "/v1/streams/"+q+"/s/cycle?keep=5&max_live=10", "")
	key := q + "/s"
	waitCell(t, ctx, key, 6, "1 stalled consumer group")
	click(t, ctx, key, "scrub")
	waitJS(t, ctx, "the group's row", `(() => { const tr = document.querySelector('#groups tr[data-group="billing"]');
		return !!tr && tr.cells[2].textContent === "3" && tr.cells[3].textContent === "17" && tr.cells[4].textContent === "yes" && tr.cells[5].textContent === "stalled (max_live)"; })()`)

	// From an id: that record and the ones after it.
	mustDo(t, ctx, chromedp.SetValue("#hist-id", ids[15]))
	press(t, ctx, "#hist-go")
	waitJS(t, ctx, "from an id", `document.querySelectorAll("#hist-rows tr").length === 5 && document.querySelector("#hist-rows tr").cells[0].textContent === "`+ids[15]+`"`)
	// By time: the last minute holds all twenty; an hour ago, none.
	setTimes := func(fromAgo, toAgo time.Duration) {
		t.Helper()
		js := `(() => { const f = ms => { const d = new Date(Date.now() - ms); d.setMinutes(d.getMinutes() - d.getTimezoneOffset()); return d.toISOString().slice(0, 19); };
			document.getElementById("hist-id").value = "";
			document.getElementById("hist-from").value = f(` + strconv.FormatInt(fromAgo.Milliseconds(), 10) + `);
			document.getElementById("hist-to").value = f(` + strconv.FormatInt(toAgo.Milliseconds(), 10) + `); return true; })()`
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
	}
	setTimes(time.Minute, -time.Minute)
	press(t, ctx, "#hist-go")
	waitJS(t, ctx, "the last minute", `document.getElementById("hist-at").textContent === "20 records" && document.querySelector("#hist-rows tr").cells[1].textContent === "archive"`)
	setTimes(2*time.Hour, time.Hour)
	press(t, ctx, "#hist-go")
	waitJS(t, ctx, "an hour ago", `document.getElementById("hist-at").textContent === "0 records"`)
}
