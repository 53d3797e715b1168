package admin

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pacegate/pacegate/consume/consumetest"
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

const (
	testToken = "s3cret-admin-token"
	llama     = "meta-llama/Llama-3-8B"
)

const testConfig = `
upstreams: [{url: "http://127.0.0.1:1"}]
defaults: {rate: 2, backlog: 100, max_wait: 30s}
tenants:
  - id: acme
    keys: [k-acme]
    limits: {rpm: 600}
  - id: vip
    keys: [k-vip]
    priority: high
  - id: "a/b"
    keys: [k-ab]
`

// fixture is an admin API over real policy and consume state. A test
// whose outcome depends on time makes it inside a synctest bubble and
// moves time with time.Sleep.
type fixture struct {
	t     *testing.T
	h     http.Handler
	table *policy.Table
	pacer *policy.Pacer
	queue *consumetest.Queue
}

func parseConfig(t testing.TB, y string) *config.File {
	t.Helper()
	f, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	q, err := parseConfig(t, testConfig).Quotas()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, table: policy.NewTable(q), queue: consumetest.New()}
	f.pacer = policy.NewPacer(f.table)
	f.h = New(Config{Token: testToken, Table: f.table, Pacer: f.pacer, Buckets: f.queue,
		Models: func() []string { return []string{llama, "small"} }, Logger: discard()})
	return f
}

// do sends an authenticated request and returns status and body.
func (f *fixture) do(method, path, body string) (int, string) {
	f.t.Helper()
	return f.doAuth(method, path, body, "Bearer "+testToken)
}

func (f *fixture) doAuth(method, path, body, auth string) (int, string) {
	f.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// expect asserts an exact status and body (bodies end with a newline,
// as json.Encoder writes them).
func (f *fixture) expect(method, path, body string, wantStatus int, wantBody string) {
	f.t.Helper()
	code, got := f.do(method, path, body)
	if code != wantStatus || got != wantBody+"\n" {
		f.t.Fatalf("%s %s %s\n got %d %s\nwant %d %s", method, path, body, code, got, wantStatus, wantBody)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
