package app

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultWatchDebounce is how long the config file must stay quiet after
// a change before it is reloaded: editors write in several steps
// (truncate + write, or write a temp file + rename), and a reload in the
// middle would read half a file.
const DefaultWatchDebounce = 250 * time.Millisecond

// configWatcher signals C when the config file's content changes. It
// watches the file's directory, not the file: an editor or a Kubernetes
// ConfigMap update that replaces the file by a rename (or swaps a
// symlink) would otherwise leave a watch on a deleted inode. Any event in
// the directory arms the debounce timer; when it fires, the file is read
// and C is signalled only if its SHA-256 differs from the last one seen,
// so unrelated files in the directory and touch-only writes cause no
// reload. Make it with watchConfig; Close stops its goroutine and waits
// for it.
type configWatcher struct {
	C <-chan struct{} // capacity 1: a pending signal absorbs later ones

	path     string
	debounce time.Duration
	logger   *slog.Logger
	w        *fsnotify.Watcher
	c        chan struct{}
	last     [32]byte
	wg       sync.WaitGroup
}

func watchConfig(path string, debounce time.Duration, logger *slog.Logger) (*configWatcher, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("config watch: %w", err)
	}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("config watch: %w", err)
	}
	c := make(chan struct{}, 1)
	cw := &configWatcher{C: c, c: c, path: abs, debounce: debounce, logger: logger, w: w}
	cw.last, _ = cw.digest() // a missing file is reported on the first reload
	cw.wg.Add(1)
	go cw.run()
	return cw, nil
}

func (cw *configWatcher) run() {
	defer cw.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case _, ok := <-cw.w.Events:
			if !ok {
				return
			}
			timer.Reset(cw.debounce) // every event restarts the quiet period
		case err, ok := <-cw.w.Errors:
			if !ok {
				return
			}
			cw.logger.Warn("config watch error", "path", cw.path, "err", err)
		case <-timer.C:
			cw.check()
		}
	}
}

// check signals when the content changed since the last signal.
func (cw *configWatcher) check() {
	d, err := cw.digest()
	if err != nil {
		if os.IsNotExist(err) {
			return // mid-replace, or deleted: the next event comes with the new file
		}
		cw.logger.Warn("config watch: cannot read the file", "path", cw.path, "err", err)
		return
	}
	if bytes.Equal(d[:], cw.last[:]) {
		return
	}
	cw.last = d
	select {
	case cw.c <- struct{}{}:
	default: // a reload is already pending; it will read the newest file
	}
}

func (cw *configWatcher) digest() ([32]byte, error) {
	b, err := os.ReadFile(cw.path)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// Close stops watching and waits for the goroutine.
func (cw *configWatcher) Close() error {
	err := cw.w.Close() // closes Events and Errors, which ends run
	cw.wg.Wait()
	return err
}

// watchFile watches o.ConfigPath for Main; the stop func ends the
// watcher. The channel is nil (never fires) in demo mode or when watching
// fails, which is logged: SIGHUP still reloads.
func watchFile(o MainOptions) (<-chan struct{}, func()) {
	if o.ConfigPath == "" {
		return nil, func() {}
	}
	w, err := watchConfig(o.ConfigPath, DefaultWatchDebounce, o.Logger)
	if err != nil {
		o.Logger.Warn("config file changes will not be picked up; send SIGHUP to reload", "err", err)
		return nil, func() {}
	}
	return w.C, func() { _ = w.Close() }
}
