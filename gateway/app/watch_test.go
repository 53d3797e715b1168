package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// expectSignal waits for one signal from the watcher.
func expectSignal(t *testing.T, w *configWatcher, what string) {
	t.Helper()
	select {
	case <-w.C:
	case <-time.After(5 * time.Second):
		t.Fatalf("no reload signal after %s", what)
	}
}

// watchDebounce is the test watcher's quiet period. A burst of writes
// coalesces only if the test writes it within one period, so it is long
// against a few small writes on a loaded machine; the watcher reads the
// real file system, so the test cannot run on virtual time.
const watchDebounce = 100 * time.Millisecond

// expectQuiet checks that no signal comes within a bounded window
// (three debounce periods).
func expectQuiet(t *testing.T, w *configWatcher, what string) {
	t.Helper()
	select {
	case <-w.C:
		t.Fatalf("unexpected reload signal after %s", what)
	case <-time.After(3 * watchDebounce):
	}
}

func TestWatchConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pacegate.yaml")
	write(t, path, "v: 1\n")
	w, err := watchConfig(path, watchDebounce, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	write(t, path, "v: 2\n")
	expectSignal(t, w, "a write in place")

	write(t, path, "v: 2\n")
	expectQuiet(t, w, "a write of identical content")

	write(t, filepath.Join(dir, "other.txt"), "x")
	expectQuiet(t, w, "a change to another file")

	// What vim and most editors do: write a temp file, rename it over.
	tmp := filepath.Join(dir, ".pacegate.yaml.swp")
	write(t, tmp, "v: 3\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	expectSignal(t, w, "a rename-replace")

	// Several writes in a burst give one reload.
	for i := range 5 {
		write(t, path, "v: 4\n#"+strings.Repeat("x", i)+"\n")
	}
	expectSignal(t, w, "a burst of writes")
	expectQuiet(t, w, "the burst was debounced")

	// The watch survives the rename: later edits are still seen.
	write(t, path, "v: 5\n")
	expectSignal(t, w, "a write after the rename")
}

// TestMainReloadsOnFileChangeAndSIGHUP runs Main on a config file: an
// edit of the file and a SIGHUP each reload it; a broken edit is refused
// and logged; cancelling the context shuts down.
func TestMainReloadsOnFileChangeAndSIGHUP(t *testing.T) {
	sim := startSim(t)
	path := filepath.Join(t.TempDir(), "pacegate.yaml")
	cfg := func(tenants string) string {
		return "listen: \"127.0.0.1:0\"\nserver: {shutdown_delay: 0s}\nupstreams: [{url: \"" + sim + "\"}]\ntenants:\n" + tenants
	}
	write(t, path, cfg("  - {id: a, keys: [k1]}\n"))
	logs := new(syncBuffer)
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, MainOptions{ConfigPath: path, Stdout: logs, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			Lookup: noEnv, Reload: hup})
	}()
	waitLog := func(substr string, n int) {
		t.Helper()
		eventually(t, 5*time.Second, "log "+substr, func() bool { return strings.Count(logs.String(), substr) >= n })
	}
	waitLog("pacegate listening", 1)

	write(t, path, cfg("  - {id: a, keys: [k1]}\n  - {id: b, keys: [k2]}\n"))
	waitLog(`msg="config reloaded" tenants=2`, 1)

	write(t, path, cfg("  - {id: a, keys: [k1]}\n  - {id: a, keys: [k2]}\n"))
	waitLog(`msg="config reload failed; keeping the previous config"`, 1)
	if !strings.Contains(logs.String(), `tenants[1].id: duplicate tenant id \"a\" (also tenants[0])`) {
		t.Fatalf("the exact validation error is not in the log:\n%s", logs)
	}

	write(t, path, cfg("  - {id: a, keys: [k1]}\n  - {id: b, keys: [k2]}\n  - {id: c, keys: [k3]}\n"))
	waitLog(`msg="config reloaded" tenants=3`, 1)
	hup <- syscall.SIGHUP
	waitLog(`msg="config reloaded" tenants=3`, 2)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Main returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Main did not return after cancel")
	}
}
