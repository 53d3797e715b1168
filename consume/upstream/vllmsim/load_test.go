package vllmsim

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// writeTimes are the offsets from t0 of a streamed response's writes.
func writeTimes(rec *recorder, t0 time.Time) []time.Duration {
	var got []time.Duration
	for _, w := range rec.writes {
		got = append(got, w.at.Sub(t0))
	}
	return got
}

func ms(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x) * time.Millisecond
	}
	return d
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// With F = 3 and MaxNumSeqs = 2, a request alone runs at factor 1 and a
// full batch at factor 3; each gap reads the batch of its own time. A
// starts alone (TTFT 100 ms), B joins at once (TTFT 300 ms); A's gaps
// are 30 ms while B runs; once A is done at 160 ms, B's gaps are 10 ms.
func TestTimeFactorUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{MaxNumSeqs: 2, TimeFactorUnderLoad: 3, TTFT: 100 * time.Millisecond, ITL: 10 * time.Millisecond})
		t0 := time.Now()
		body := `{"prompt":"a","max_tokens":3,"stream":true}`
		a := make(chan *recorder)
		go func() { a <- serve(t.Context(), s, "POST", "/v1/completions", body, nil) }()
		synctest.Wait()
		b := serve(t.Context(), s, "POST", "/v1/completions", body, nil)
		// Each: headers flush, tok0, tok1, tok2, finish, [DONE].
		if got, want := writeTimes(<-a, t0), ms(100, 130, 160, 160, 160); !equalDurations(got, want) {
			t.Errorf("A's writes at %v, want %v", got, want)
		}
		if got, want := writeTimes(b, t0), ms(300, 310, 320, 320, 320); !equalDurations(got, want) {
			t.Errorf("B's writes at %v, want %v", got, want)
		}
	})
}

// A non-streamed response steps through its tokens when the factor can
// change: a full batch of two with F = 2 takes TTFT·2 + 2 gaps·2.
func TestTimeFactorNonStreamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{MaxNumSeqs: 2, TimeFactorUnderLoad: 2, TTFT: 100 * time.Millisecond, ITL: 10 * time.Millisecond})
		t0 := time.Now()
		done := make(chan time.Duration, 2)
		for range 2 {
			go func() {
				serve(t.Context(), s, "POST", "/v1/completions", `{"prompt":"a","max_tokens":3}`, nil)
				done <- time.Since(t0)
			}()
		}
		// Whichever starts first reads running 1 for its TTFT (100 ms)
		// and running 2 for its gaps (20 ms each): 140 ms; the other one
		// reads running 2 for its TTFT (200 ms), then running 1 for its
		// gaps (10 ms each, from 200 ms on).
		got := []time.Duration{<-done, <-done}
		if want := ms(140, 220); !equalDurations(got, want) {
			t.Errorf("done at %v, want %v", got, want)
		}
	})
}

func TestTimeFactorFlag(t *testing.T) {
	var out strings.Builder
	cfg, _, err := parseFlags([]string{"--time-factor-under-load", "2.5", "--max-num-seqs", "8"}, &out)
	if err != nil || cfg.TimeFactorUnderLoad != 2.5 || cfg.MaxNumSeqs != 8 {
		t.Fatalf("cfg %+v, %v", cfg, err)
	}
	for _, bad := range []string{"0.5", "NaN", "+Inf"} {
		_, _, err = parseFlags([]string{"--time-factor-under-load", bad}, &out)
		if err == nil || !strings.HasPrefix(err.Error(), "sim: --time-factor-under-load must be a number >= 1, got ") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}
