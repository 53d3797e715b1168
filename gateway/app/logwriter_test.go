package app

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// lockedBuffer is what a log writer writes to, read by the test.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.b.Write(p)
}

func (b *lockedBuffer) read() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String(), b.writes
}

// Request lines wait for the batch: written together, logFlushEvery
// after the first, in one write.
func TestLogLinesAreWrittenInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		w, closeLogs := BufferLogs(&out)
		defer closeLogs()
		log := NewLogger(w, "info")
		log.Info("request", "n", 1)
		time.Sleep(logFlushEvery / 2)
		log.Info("request", "n", 2)
		synctest.Wait()
		if got, _ := out.read(); got != "" {
			t.Fatalf("written before the batch was due: %q", got)
		}
		time.Sleep(logFlushEvery / 2)
		synctest.Wait()
		got, writes := out.read()
		if writes != 1 || strings.Count(got, `"msg":"request"`) != 2 || !strings.Contains(got, `"n":2`) {
			t.Fatalf("after %v: %d writes of %q; want both lines in one", logFlushEvery, writes, got)
		}
		log.Info("request", "n", 3)
		time.Sleep(logFlushEvery)
		synctest.Wait()
		if got, writes := out.read(); writes != 2 || !strings.Contains(got, `"n":3`) {
			t.Fatalf("the next batch: %d writes of %q", writes, got)
		}
	})
}

// A full batch is written at once, a warning flushes the lines before
// it with it, and Close writes what waits and then writes through.
func TestLogBatchEndsEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out lockedBuffer
		w, closeLogs := BufferLogs(&out)
		log := NewLogger(w, "info")
		big := strings.Repeat("x", logFlushBytes/4)
		for range 4 {
			log.Info("request", "pad", big)
		}
		if got, writes := out.read(); writes != 1 || strings.Count(got, "\n") != 4 {
			t.Fatalf("a full batch: %d writes, %d lines; want 1 write of 4", writes, strings.Count(got, "\n"))
		}
		log.Info("request", "n", 1)
		log.Warn("upstream marked down")
		if got, writes := out.read(); writes != 2 || !strings.HasSuffix(got, `"msg":"upstream marked down"}`+"\n") || !strings.Contains(got, `"n":1`) {
			t.Fatalf("a warning: %d writes, ending %q", writes, got[len(got)-80:])
		}
		log.Info("request", "n", 2)
		closeLogs()
		if got, writes := out.read(); writes != 3 || !strings.Contains(got, `"n":2`) {
			t.Fatalf("close: %d writes, %q", writes, got[len(got)-80:])
		}
		log.Info("request", "n", 3)
		if got, writes := out.read(); writes != 4 || !strings.Contains(got, `"n":3`) {
			t.Fatalf("after close: %d writes, %q", writes, got[len(got)-80:])
		}
	})
}
