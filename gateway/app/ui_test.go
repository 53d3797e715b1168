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
defaults: {rate: 0.25, backlog: 100, max_wait: 60s}
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
func TestMatrixPageDrivesQueuedRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	bctx := uitest.Browser(t, ctx)
	ta := startApp(t, fastSim(), uiConfig)
	k := policy.Key{Tenant: "acme", Model: simModel}
	eventually(t, 5*time.Second, "the pool to discover the model", func() bool { return len(ta.a.servedModels()) > 0 })

	results := ta.fire(5, "sk-acme") // one leaves at once; 4 wait 4 s each
	eventually(t, 5*time.Second, "4 queued requests", func() bool { return ta.a.Queue.Backlog(k) == 4 })
	cell := chromedp.CSS(fmt.Sprintf(`td.cell[data-tenant="acme"][data-model=%q]`, simModel))
	if err := chromedp.Do(bctx,
		chromedp.Navigate("http://"+ta.a.AdminAddr()+"/admin/ui#token="+adminToken),
		chromedp.WaitVisible(cell+`[data-backlog="4"][data-effective-rate="0.25"]`),
	); err != nil {
		t.Fatalf("the page did not show the filled bucket: %v", err)
	}
	uitest.Screenshot(t, bctx, "matrix-queued.png")

	if err := chromedp.Do(bctx,
		chromedp.Click(cell),
		chromedp.WaitVisible(chromedp.CSS(`#edit-info[data-effective-rate="0.25"]`)),
		chromedp.SetValue(chromedp.ID("edit-rate"), "20"),
		chromedp.Click(chromedp.ID("edit-save")),
	); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the page's rate to reach the pacer", func() bool { return ta.a.Pacer.EffectiveRate(k) == 20 })
	for range 5 { // bounded by the 4 s suspension taken at the old rate
		if r := <-results; r.status != 200 {
			t.Fatalf("queued request: %d %s", r.status, r.body)
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
