package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pacegate/pacegate/consume"
	"github.com/pacegate/pacegate/consume/upstream/vllmsim"
	"github.com/pacegate/pacegate/gateway/app"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

// prometheusOwn are series Prometheus makes itself for every target.
const prometheusOwn = "up"

const (
	adminToken = "adm-deploy-test"
	model      = "sim-model"
	dashboard  = "grafana/dashboards/pacegate.json"
	alertRules = "prometheus/rules/pacegate.yml"
)

func TestDashboardMetricsAreExported(t *testing.T) {
	checkNames(t, dashboard, dashboardQueries(t), liveMetricNames(t))
}

func TestAlertRuleMetricsAreExported(t *testing.T) {
	checkNames(t, alertRules, ruleQueries(t), liveMetricNames(t))
}

// checkNames fails for every metric named in queries that the scrape
// lacks, except Prometheus' own series.
func checkNames(t *testing.T, file string, queries []string, scraped map[string]bool) {
	t.Helper()
	if len(queries) == 0 {
		t.Fatalf("%s: no queries found", file)
	}
	for _, q := range queries {
		names := metricNames(q)
		if len(names) == 0 {
			t.Errorf("%s: query names no metric: %s", file, q)
		}
		for _, n := range names {
			switch {
			case scraped[n]:
			case slices.Contains(strings.Fields(prometheusOwn), n):
			default:
				t.Errorf("%s: %s is not in a live /metrics scrape; query: %s", file, n, q)
			}
		}
	}
}

var (
	// metricRe finds metric names: pacegate's, and Prometheus' own.
	metricRe = regexp.MustCompile(`\b(pacegate_[a-zA-Z0-9_:]+|up)\b`)
	// quotedRe removes label values and strings, which may contain
	// metric-like words.
	quotedRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// metricNames returns the metric names in a PromQL query. Label names
// (by (model), ...) never start with pacegate_, and the only non-pacegate
// metric the kit queries is up, which is not a PromQL keyword or function.
func metricNames(q string) []string {
	var out []string
	for _, n := range metricRe.FindAllString(quotedRe.ReplaceAllString(q, `""`), -1) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`sum by (up) (rate(pacegate_requests_total{outcome="pacegate_x"}[5m])) / up{job="pacegate"} + pacegate_a_bucket`)
	want := []string{"up", "pacegate_requests_total", "pacegate_a_bucket"}
	if !slices.Equal(got, want) {
		t.Fatalf("metricNames = %q, want %q", got, want)
	}
}

// panel is the part of a Grafana panel the tests read.
type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

type dashboardJSON struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) dashboardJSON {
	t.Helper()
	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboardJSON
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	return d
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// dashboardQueries returns every PromQL query of the dashboard: panel
// targets and query variables.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	d := readDashboard(t)
	var out []string
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		out = append(out, q.Query)
	}
	return out
}

// TestDashboardShape checks what Grafana needs to load every panel: unique
// ids, the data source variable, and a query in every target.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" {
		t.Error("dashboard has no uid: provisioning would duplicate it")
	}
	ids := map[int]string{}
	for _, p := range allPanels(d.Panels) {
		if prev, ok := ids[p.ID]; ok {
			t.Errorf("panel id %d used by %q and %q", p.ID, prev, p.Title)
		}
		ids[p.ID] = p.Title
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source is not ${datasource}", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %q has no query or a duplicate refId", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
}

// ruleQueries returns every alert and recording rule expression.
func ruleQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", alertRules, err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && r.Annotations["runbook"] == "" {
				t.Errorf("alert %s has no runbook annotation", r.Alert)
			}
			out = append(out, r.Expr)
		}
	}
	return out
}

// TestComposeConfigIsValid loads the gateway config the compose stack
// mounts, as pacegate does at start (the image sets the listeners and the
// stack the admin token through the environment).
func TestComposeConfigIsValid(t *testing.T) {
	env := map[string]string{"PACEGATE_LISTEN": "0.0.0.0:8080", "PACEGATE_ADMIN_LISTEN": "0.0.0.0:9090", "PACEGATE_ADMIN_TOKEN": "x"}
	cfg, err := config.LoadEnv("compose/pacegate.yaml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Upstreams[0].URL; got != "http://sim:8000" {
		t.Errorf("upstream = %s, want the compose service sim", got)
	}
}

// TestComposeClusterStore checks that the gateway's cluster store is the
// compose service redis, which the gateway waits for.
func TestComposeClusterStore(t *testing.T) {
	var stack struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			DependsOn   any               `yaml:"depends_on"` // a list or a map
			Healthcheck map[string]any    `yaml:"healthcheck"`
		} `yaml:"services"`
	}
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &stack); err != nil {
		t.Fatal(err)
	}
	gw := stack.Services["pacegate"]
	u, err := config.ParseStoreURL(gw.Environment["PACEGATE_CLUSTER_STORE"])
	if err != nil || u.Addr != "redis:6379" {
		t.Fatalf("PACEGATE_CLUSTER_STORE %q: %+v %v, want the compose service redis", gw.Environment["PACEGATE_CLUSTER_STORE"], u, err)
	}
	deps, _ := gw.DependsOn.(map[string]any)
	if _, ok := deps["redis"]; !ok || stack.Services["redis"].Healthcheck == nil {
		t.Errorf("pacegate must wait for a healthy redis: depends_on %v", gw.DependsOn)
	}
}

// TestComposeTokenFile checks that Prometheus reads the admin token from
// the file the compose stack mounts it as.
func TestComposeTokenFile(t *testing.T) {
	var stack struct {
		Services map[string]struct {
			Secrets []string `yaml:"secrets"`
		} `yaml:"services"`
		Secrets map[string]struct {
			Environment string `yaml:"environment"`
		} `yaml:"secrets"`
	}
	readYAML(t, "compose.yaml", &stack)
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			Authorization struct {
				CredentialsFile string `yaml:"credentials_file"`
			} `yaml:"authorization"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "prometheus/prometheus.yml", &prom)
	if len(prom.ScrapeConfigs) != 1 || prom.ScrapeConfigs[0].JobName != "pacegate" {
		t.Fatalf("want one scrape config, job pacegate (the alert rules select it): %+v", prom.ScrapeConfigs)
	}
	file := prom.ScrapeConfigs[0].Authorization.CredentialsFile
	name, ok := strings.CutPrefix(file, "/run/secrets/")
	if !ok || !slices.Contains(stack.Services["prometheus"].Secrets, name) {
		t.Fatalf("credentials_file %s is not a secret of the prometheus service (%v)", file, stack.Services["prometheus"].Secrets)
	}
	if got := stack.Secrets[name].Environment; got != "PACEGATE_ADMIN_TOKEN" {
		t.Errorf("secret %s comes from %q, want PACEGATE_ADMIN_TOKEN, the gateway's token", name, got)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

var (
	scrapeOnce  sync.Once
	scrapeNames map[string]bool
	scrapeErr   error
)

// liveMetricNames starts a gateway in front of a simulated vLLM, drives it
// through every path that creates a labelled series, and returns the
// metric names of its admin /metrics scrapes. The gateway is shared by the
// tests of this package and shut down when the scrape is done.
func liveMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	scrapeOnce.Do(func() { scrapeNames, scrapeErr = scrapeLive() })
	if scrapeErr != nil {
		t.Fatal(scrapeErr)
	}
	return scrapeNames
}

const liveConfig = `listen: "127.0.0.1:0"
admin: {listen: "127.0.0.1:0", token: %q}
upstreams: [{url: %q}, {url: %q}]
tenants:
  - {id: fast, keys: [sk-fast]}
  - {id: capped, keys: [sk-capped], limits: {rpm: 1}}
  - {id: slow, keys: [sk-slow], limits: {rate: 1}}
`

func scrapeLive() (map[string]bool, error) {
	simulated := vllmsim.New(vllmsim.Config{Models: []string{model}, TTFT: time.Millisecond, ITL: time.Millisecond})
	sim := httptest.NewServer(simulated)
	defer sim.Close()
	// A model server that passes the health checks but drops every
	// generation request before its first byte: the pool counts an
	// upstream error and retries on sim.
	var broken atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			broken.Add(1)
			panic(http.ErrAbortHandler) // closes the connection, no response
		}
		simulated.ServeHTTP(w, r)
	}))
	defer flaky.Close()
	cfg, err := config.Parse(fmt.Appendf(nil, liveConfig, adminToken, flaky.URL, sim.URL))
	if err != nil {
		return nil, err
	}
	a, err := app.New(cfg, app.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if err := a.Start(context.Background()); err != nil {
		return nil, err
	}
	defer a.Shutdown(context.Background(), 0, time.Second)
	return drive(a, &broken)
}

// drive makes every series the kit queries appear: served requests
// (requests, histograms, releases, upstream responses) of which one met
// the broken upstream (upstream errors; broken counts those), a 429
// (rejected), a paced bucket with a backlog at scrape time (suspensions,
// the top-K bucket series and the per-model aggregates), and queued
// requests whose clients leave (dropped).
func drive(a *app.App, broken *atomic.Int64) (map[string]bool, error) {
	// The pool takes turns between idle upstreams, so the first or the
	// second request meets the broken one; a few more allow for a probe
	// in between.
	for i := 0; broken.Load() == 0; i++ {
		if i == 10 {
			return nil, errors.New("no request reached the broken upstream")
		}
		if code := chat(context.Background(), a, "sk-fast"); code != http.StatusOK {
			return nil, fmt.Errorf("fast request: status %d", code)
		}
	}
	chat(context.Background(), a, "sk-capped")
	if code := chat(context.Background(), a, "sk-capped"); code != http.StatusTooManyRequests {
		return nil, fmt.Errorf("second request over rpm 1: status %d, want 429", code)
	}
	// Six requests at 1/s: the first is released, the rest wait in the
	// bucket (suspended) until the test's clients give up; at least two
	// of them for 3 s, a wide window on a loaded machine.
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	for range 6 {
		go chat(ctx, a, "sk-slow")
	}
	if err := poll(10*time.Second, "slow bucket backlog", func() bool {
		items, _ := a.Queue.List(consume.ListQuery{Tenant: "slow", Exact: true, NonEmpty: true})
		return len(items) == 1 && items[0].Backlog >= 2
	}); err != nil {
		return nil, err
	}
	// The first scrape computes the per-model aggregates, so it must see
	// the backlog.
	names, err := scrape(a)
	if err != nil {
		return nil, err
	}
	leave()
	// A consumer panic cannot be provoked from outside without breaking
	// the gateway: report one through the observer call the consumer
	// makes when it recovers from a panic.
	a.Metrics.Panicked(policy.Key{Tenant: "fast", Model: model})
	err = poll(10*time.Second, "dropped requests", func() bool {
		more, err := scrape(a)
		for n := range more {
			names[n] = true
		}
		return err == nil && names["pacegate_dropped_total"]
	})
	return names, err
}

// chat sends a non-streamed chat completion and returns its status (0 when
// the request failed, e.g. because ctx was cancelled).
func chat(ctx context.Context, a *app.App, key string) int {
	body := fmt.Sprintf(`{"model":%q,"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, model)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// scrape GETs the admin /metrics as Prometheus does and returns the names
// of its samples (histograms as _bucket, _sum and _count).
func scrape(a *app.App) (map[string]bool, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.AdminAddr()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names, sc.Err()
}

// poll checks cond every 10 ms until it holds or within passes: the
// gateway works on its own goroutines, which the test cannot join.
func poll(within time.Duration, what string, cond func() bool) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(within)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("timed out after %s waiting for %s", within, what)
		}
	}
	return nil
}

// TestScrapeHasRareSeries guards the guard: the series that appear only
// after a rare event (a backlog, a drop, a panic) must be in the live
// scrape, or drive stopped provoking them and a correct query would look
// wrong.
func TestScrapeHasRareSeries(t *testing.T) {
	names := liveMetricNames(t)
	var got []string
	for n := range names {
		if strings.HasPrefix(n, "pacegate_") {
			got = append(got, n)
		}
	}
	sort.Strings(got)
	t.Logf("live scrape: %d pacegate_ series names: %s", len(got), strings.Join(got, " "))
	for _, want := range []string{"pacegate_bucket_backlog", "pacegate_model_buckets", "pacegate_suspends_total",
		"pacegate_dropped_total", "pacegate_consumer_panics_total", "pacegate_upstream_errors_total",
		"pacegate_queue_wait_seconds_bucket"} {
		if !names[want] {
			t.Errorf("live scrape lacks %s", want)
		}
	}
}

// TestHelmConfigLoads renders the chart with helm (built by
// scripts/deploy-tools.sh) with each values file and loads the rendered
// pacegate.yaml as a pod would: from the ConfigMap, with the environment
// the StatefulSet sets.
func TestHelmConfigLoads(t *testing.T) {
	helm, err := filepath.Abs("../.cache/deploy-tools/bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(helm); err != nil {
		t.Skip("helm not built: run bash scripts/deploy-tools.sh (make deploy-check does)")
	}
	for name, values := range map[string]string{"default": "", "rocketmq": "helm/pacegate/ci/rocketmq-values.yaml",
		"cluster": "helm/pacegate/ci/cluster-values.yaml"} {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", "pacegate", "helm/pacegate", "--kube-version", "1.28.0", "--show-only", "templates/configmap.yaml"}
			if values != "" {
				args = append(args, "-f", values)
			}
			out, err := exec.Command(helm, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			var cm struct {
				Data map[string]string `yaml:"data"`
			}
			if err := yaml.Unmarshal(out, &cm); err != nil {
				t.Fatal(err)
			}
			cfg := loadRendered(t, cm.Data["pacegate.yaml"])
			if cfg.Listen != "0.0.0.0:8080" || cfg.Admin.Listen != "0.0.0.0:9090" || cfg.Admin.Token == "" {
				t.Errorf("listeners %s, %s, token set %t: want 0.0.0.0:8080, 0.0.0.0:9090, true", cfg.Listen, cfg.Admin.Listen, cfg.Admin.Token != "")
			}
			for _, tn := range cfg.Tenants {
				for _, k := range tn.Keys {
					if !strings.HasPrefix(k, "sha256:") {
						t.Errorf("tenant %s: a plain key is in the ConfigMap", tn.ID)
					}
				}
			}
			wantReplicas := map[string]int{"default": 1, "rocketmq": 3, "cluster": 3}[name]
			if c := cfg.Cluster; c.Replicas != wantReplicas || c.ReplicaID != "2" {
				t.Errorf("cluster replicas %d, replica_id %q: want %d (replicaCount) and the pod's ordinal", c.Replicas, c.ReplicaID, wantReplicas)
			}
			if d := cfg.Deprecations(); len(d) > 0 {
				t.Errorf("the chart renders deprecated keys: %q", d)
			}
			wantStore := map[string]string{"cluster": "redis://pacegate-redis:6379/0"}[name]
			if cfg.Cluster.Store != wantStore {
				t.Errorf("cluster store %q, want %q", cfg.Cluster.Store, wantStore)
			}
		})
	}
}

// loadRendered loads a rendered pacegate.yaml with the environment of the
// pod whose ordinal is 2.
func loadRendered(t *testing.T, text string) *config.File {
	t.Helper()
	env := map[string]string{"PACEGATE_ADMIN_TOKEN": "x", "PACEGATE_CLUSTER_REPLICA_ID": "2"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	path := filepath.Join(t.TempDir(), "pacegate.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadEnv(path, lookup)
	if err != nil {
		t.Fatalf("rendered pacegate.yaml: %v\n%s", err, text)
	}
	return cfg
}
