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

// writeAtomic replaces path's content at once (a temp file renamed over
// it): a reader never sees it empty or half written, however slowly the
// test runs.
func writeAtomic(t *testing.T, path, s string) {
	t.Helper()
	tmp := path + ".tmp"
	write(t, tmp, s)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// overwrite writes s over the start of path in place, without truncating
// it. With s as long as the file, a reader sees the old bytes or the new
// ones at each offset, never an empty or shorter file.
func overwrite(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// expectSignal waits for one signal from the watcher and returns when it
// came.
func expectSignal(t *testing.T, w *configWatcher, what string) time.Time {
	t.Helper()
	select {
	case <-w.C:
		return time.Now()
	case <-time.After(10 * time.Second): // hang guard
		t.Fatalf("no reload signal after %s", what)
	}
	panic("unreachable")
}

// watchDebounce is the test watcher's quiet period. The watcher reads the
// real file system, so the test cannot run on virtual time; each check
// below holds however long the machine stalls between or inside writes.
const watchDebounce = 100 * time.Millisecond

// expectQuiet checks that no signal comes within a bounded window
// (three debounce periods). Used only where the file holds what the
// watcher last signalled, so that no signal is due whatever the timing.
func expectQuiet(t *testing.T, w *configWatcher, what string) {
	t.Helper()
	select {
	case <-w.C:
		t.Fatalf("unexpected reload signal after %s", what)
	case <-time.After(3 * watchDebounce):
	}
}

// drain takes the signals that come until the watcher is quiet for three
// debounce periods.
func drain(w *configWatcher) {
	for {
		select {
		case <-w.C:
		case <-time.After(3 * watchDebounce):
			return
		}
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

	// In place, one byte changing: the file is never in between, so one
	// signal, and not before the directory was quiet for the debounce
	// period. No event can predate since (nothing was written since the
	// watch began), so the bound holds on any machine.
	since := time.Now()
	overwrite(t, path, "v: 2\n")
	if d := expectSignal(t, w, "a write in place").Sub(since); d < watchDebounce {
		t.Fatalf("reload signal %v after the write, sooner than the %v debounce", d, watchDebounce)
	}

	// The same bytes written in place: events, but the content never
	// differs from what was signalled.
	overwrite(t, path, "v: 2\n")
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

	// A burst of truncate-and-write edits gives a signal. Written within
	// one debounce period it is one; a stall of a period between two
	// writes (or between a truncate and its write) lets the watcher see an
	// intermediate file and signal for it too, so take them all.
	for i := range 5 {
		write(t, path, "v: 4\n#"+strings.Repeat("x", i)+"\n")
	}
	expectSignal(t, w, "a burst of writes")
	drain(w)
	// The watcher settled on the burst's last content: writing it again
	// (at once) is no change. A watcher that read the file before the
	// burst ended and missed the rest would signal here.
	writeAtomic(t, path, "v: 4\n#xxxx\n")
	expectQuiet(t, w, "rewriting the burst's last content")

	// The watch is on the directory, so it survives the renames: an edit
	// in place of the file now there is still seen.
	overwrite(t, path, "v: 5\n#xxxx\n")
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
		eventually(t, 10*time.Second, "log "+substr, func() bool { return strings.Count(logs.String(), substr) >= n })
	}
	waitLog("pacegate listening", 1)

	writeAtomic(t, path, cfg("  - {id: a, keys: [k1]}\n  - {id: b, keys: [k2]}\n"))
	waitLog(`msg="config reloaded" tenants=2`, 1)

	writeAtomic(t, path, cfg("  - {id: a, keys: [k1]}\n  - {id: a, keys: [k2]}\n"))
	waitLog(`msg="config reload failed; keeping the previous config"`, 1)
	if !strings.Contains(logs.String(), `tenants[1].id: duplicate tenant id \"a\" (also tenants[0])`) {
		t.Fatalf("the exact validation error is not in the log:\n%s", logs)
	}

	writeAtomic(t, path, cfg("  - {id: a, keys: [k1]}\n  - {id: b, keys: [k2]}\n  - {id: c, keys: [k3]}\n"))
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
