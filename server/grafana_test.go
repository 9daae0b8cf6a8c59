package server

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// metricName matches the metric names in a PromQL expression.
var metricName = regexp.MustCompile(`\b(?:echostore|process|go)_[a-z0-9_]+\b`)

// dashboardExprs returns every expression of docs/grafana/echostore.json:
// its panels' targets and its template variables' queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/grafana/echostore.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Definition string
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("docs/grafana/echostore.json: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		out = append(out, v.Definition)
	}
	return out
}

// alertExprs returns every rule's expression of docs/grafana/alerts.yaml,
// checking the shape of each rule.
func alertExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/grafana/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("docs/grafana/alerts.yaml: %v", err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert rule %+v: want alert, expr, labels.severity and annotations.summary", r)
			}
			out = append(out, r.Expr)
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/grafana/alerts.yaml has no rules")
	}
	return out
}

// TestGrafanaMetricsExist: every metric the Grafana dashboard and the
// example alert rules use is on a real serve's /metrics after a day's
// worth of operations in miniature (append, cycle, enqueue both ways,
// claim, ack), and every expression's brackets balance.
func TestGrafanaMetricsExist(t *testing.T) {
	exprs := append(dashboardExprs(t), alertExprs(t)...)
	e := start(t, Config{})
	q := queueName(t)
	appendN(e, q, "events", 0, 20)
	e.must("POST", "/v1/streams/"+q+"/events/cycle?keep=5", "")
	e.must("POST", "/v1/queues/"+q+"/jobs", `{"payload":{"n":1}}`)
	e.must("POST", "/v1/queues/"+q+"/jobs?mode=sync", `{"payload":{"n":2}}`)
	// One job put on the job stream directly, so that a claim has one to
	// take whatever the dispatch of the two above has done by then.
	putJob(t, e, q)
	var claim struct{ Jobs []struct{ Entry string } }
	if err := json.Unmarshal(e.must("POST", "/v1/queues/"+q+"/claim?count=10", ""), &claim); err != nil {
		t.Fatal(err)
	}
	if len(claim.Jobs) == 0 {
		t.Fatal("claim got no job")
	}
	for _, j := range claim.Jobs {
		e.must("POST", "/v1/queues/"+q+"/ack", fmt.Sprintf(`{"entries":[%q]}`, j.Entry))
	}
	scrape := string(e.must("GET", "/metrics", ""))
	var missing []string
	for _, x := range exprs {
		if strings.Count(x, "(") != strings.Count(x, ")") || strings.Count(x, "{") != strings.Count(x, "}") ||
			strings.Count(x, "[") != strings.Count(x, "]") {
			t.Errorf("unbalanced expression: %s", x)
		}
		for _, name := range metricName.FindAllString(x, -1) {
			if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).MatchString(scrape) {
				missing = append(missing, name)
			}
		}
	}
	slices.Sort(missing)
	if missing = slices.Compact(missing); len(missing) > 0 {
		t.Fatalf("metrics used by docs/grafana but not on /metrics: %s", strings.Join(missing, ", "))
	}
}
