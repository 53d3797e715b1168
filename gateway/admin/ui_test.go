package admin

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pacegate/pacegate/consume/upstream"
	"github.com/pacegate/pacegate/gateway/admin/uitest"
	"github.com/pacegate/pacegate/policy"
)

// waitFor polls cond until it holds or the deadline passes: the browser
// works on its own schedule, so this is the one place a poll is used.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMatrixPageInChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	f := newFixture(t)
	f.pacer = policy.NewPacer(f.table) // the wall clock: the page runs in real time
	f.h = New(Config{Token: testToken, Table: f.table, Pacer: f.pacer, Buckets: f.queue,
		Models: func() []string { return []string{llama, "small"} }, Logger: discard(),
		Upstreams: func() []upstream.UpstreamStat {
			return []upstream.UpstreamStat{{URL: "http://u1", Healthy: true, Limit: 8, Routed: map[string]uint64{"prefix": 9},
				PromptTokens: 3000, CachedTokens: 2000, IndexBlocks: 12, IndexCapacity: 4096}}
		}})
	bctx := uitest.Browser(t, ctx)
	srv := httptest.NewServer(f.h)
	defer srv.Close()

	// Five requests queued behind acme's slow pace on llama.
	k := policy.Key{Tenant: "acme", Model: llama}
	if code, body := f.do("PUT", "/admin/buckets/acme/"+llama, `{"rate":0.2}`); code != 200 {
		t.Fatal(code, body)
	}
	for range 5 {
		f.queue.Submit(k, time.Now())
	}
	vip := policy.Key{Tenant: "vip", Model: "small"} // and a suspended one, for the screenshot
	for range 40 {
		f.queue.Submit(vip, time.Now())
	}
	f.queue.Suspend(vip, time.Hour)
	cellSel := fmt.Sprintf(`td.cell[data-tenant="acme"][data-model=%q]`, llama)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/admin/ui#token="+testToken),
		chromedp.WaitVisible(chromedp.CSS(cellSel+`[data-backlog="5"][data-effective-rate="0.2"]`)),
	); err != nil {
		t.Fatalf("the page did not show the filled bucket: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`tr.upstream[data-url="http://u1"][data-hit-ratio="0.667"]`))); err != nil {
		t.Fatalf("the page did not show the upstream's prefix-cache hits: %v", err)
	}
	href, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(href, "token") {
		t.Fatalf("the token stayed in the address bar: %s", href)
	}

	// Edit the bucket's rate in the page.
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(cellSel)),
		chromedp.WaitVisible(chromedp.ID("editor")),
		chromedp.WaitVisible(chromedp.CSS(`#edit-info[data-effective-rate="0.2"]`)),
		chromedp.SetValue(chromedp.ID("edit-rate"), "4"),
		chromedp.Click(chromedp.ID("edit-save")),
	); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pacer to take the page's rate", 10*time.Second, func() bool { return f.pacer.EffectiveRate(k) == 4 })
	// And the global factor.
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(chromedp.CSS(cellSel+`[data-effective-rate="4"]`)),
		chromedp.SetValue(chromedp.ID("global-factor"), "0.5"),
		chromedp.Click(chromedp.ID("global-set")),
		chromedp.WaitVisible(chromedp.CSS(cellSel+`[data-effective-rate="2"]`)),
	); err != nil {
		t.Fatalf("the page did not reflect the change: %v", err)
	}
	if got := f.pacer.GlobalFactor(); got != 0.5 {
		t.Fatalf("GlobalFactor = %v, want 0.5", got)
	}
	path := uitest.Screenshot(t, bctx, "matrix-admin.png")
	fmt.Fprintf(os.Stderr, "matrix page screenshot: %s\n", path)
}
