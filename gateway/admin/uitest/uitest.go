// Package uitest runs the bucket matrix page in a real headless Chromium
// for tests (the admin package's own, and the end-to-end ones in
// gateway/app). Chromium is Debian's package, installed by
// scripts/chromium.sh; without it a test is skipped, unless the CI
// environment variable is set, in which case it fails.
package uitest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium returns the browser binary, or skips (fails under CI).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not found and CI is set: run scripts/chromium.sh")
	}
	t.Skip("chromium not found: run scripts/chromium.sh to run the browser test (CI unset, skipping)")
	return ""
}

// Browser starts a headless Chromium with a new empty profile, stopped
// when the test ends, and returns a context for chromedp actions.
func Browser(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), // small /dev/shm in containers
		chromedp.WindowSize(1280, 720),
	}
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancel)
	bctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	return bctx
}

// Screenshot saves a full-page PNG as <module root>/artifacts/ui/<name>
// and returns its path.
func Screenshot(t testing.TB, bctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // 100 = PNG; below is JPEG
	if err != nil {
		t.Fatal(err)
	}
	path := artifactPath(t, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

func artifactPath(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
	out := filepath.Join(dir, "artifacts", "ui")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(out, name)
}
