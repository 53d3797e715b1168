package app

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pacegate/pacegate/gateway/admin/uitest"
	"github.com/pacegate/pacegate/policy"
)

const uiConfig = `
defaults: {rate: 0.01, backlog: 100, max_wait: 10m}
server: {request_timeout: 11m}
tenants:
  - {id: acme, keys: [sk-acme]}
  - {id: globex, keys: [sk-globex], priority: high}
  - {id: initech, keys: [sk-initech]}
`

// TestMatrixPageDrivesQueuedRequests runs the whole process in front of
// a simulated vLLM and the matrix page in headless Chromium: requests
// queue behind a slow pace, the page shows the filled bucket, the rate
// is raised in the page, the pacer takes it and the queue drains, and
// the page shows that too.
//
// At 0.01/s the second release is 100 s after the first, past the test's
// 50 s context: the backlog stays at 4 however long Chromium takes, and
// only the page's rate change can drain it (the speed-up wakes the
// suspended bucket). max_wait admits a backlog of 3 (300 s) ahead of the
// last request; request_timeout must exceed it.
func TestMatrixPageDrivesQueuedRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	bctx := uitest.Browser(t, ctx)
	// Start Chromium now, not at the first Navigate: its cold start is
	// then not part of any wait below.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting the browser: %v", err)
	}
	ta := startApp(t, fastSim(), uiConfig)
	k := policy.Key{Tenant: "acme", Model: simModel}
	eventually(t, 10*time.Second, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })

	results := ta.fire(5, "sk-acme") // one leaves at once; 4 wait 100 s each
	eventually(t, 10*time.Second, "4 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 4 })
	cell := chromedp.CSS(fmt.Sprintf(`td.cell[data-tenant="acme"][data-model=%q]`, simModel))
	if err := chromedp.Do(bctx,
		chromedp.Navigate("http://"+ta.a.AdminAddr()+"/admin/ui#token="+adminToken),
		chromedp.WaitVisible(cell+`[data-backlog="4"][data-effective-rate="0.01"]`),
	); err != nil {
		t.Fatalf("the page did not show the filled bucket: %v", err)
	}
	uitest.Screenshot(t, bctx, "matrix-queued.png")

	if err := chromedp.Do(bctx,
		chromedp.Click(cell),
		chromedp.WaitVisible(chromedp.CSS(`#edit-info[data-effective-rate="0.01"]`)),
		chromedp.SetValue(chromedp.ID("edit-rate"), "20"),
		chromedp.Click(chromedp.ID("edit-save")),
	); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the page's rate to reach the pacer", func() bool { return ta.a.Pacer.EffectiveRate(k) == 20 })
	// All 5 answered 200: the 4 queued ones were released by the page's
	// rate (their old slots were 100 s on). Bounded by the test's context.
	for i := range 5 {
		select {
		case r := <-results:
			if r.status != 200 {
				t.Fatalf("queued request: %d %s", r.status, r.body)
			}
		case <-ctx.Done():
			t.Fatalf("%d of 5 requests answered before the test's context ended: the rate change did not release the queue", i)
		}
	}
	if err := chromedp.Do(bctx,
		chromedp.WaitVisible(cell+`[data-backlog="0"][data-effective-rate="20"]`),
	); err != nil {
		t.Fatalf("the page did not show the drained bucket at the new rate: %v", err)
	}
	path := uitest.Screenshot(t, bctx, "matrix.png")
	fmt.Fprintf(os.Stderr, "matrix page screenshot: %s\n", path)
}
