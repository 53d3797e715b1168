package vllmsim

import (
	"context"
	"slices"
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
		if got, want := writeTimes(<-a, t0), ms(100, 130, 160, 160, 160); !slices.Equal(got, want) {
			t.Errorf("A's writes at %v, want %v", got, want)
		}
		if got, want := writeTimes(b, t0), ms(300, 310, 320, 320, 320); !slices.Equal(got, want) {
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
		if want := ms(140, 220); !slices.Equal(got, want) {
			t.Errorf("done at %v, want %v", got, want)
		}
	})
}

func TestLoadFlags(t *testing.T) {
	var out strings.Builder
	cfg, _, err := parseFlags([]string{"--time-factor-under-load", "2.5", "--max-num-seqs", "8", "--prefill-per-token", "200us"}, &out)
	if err != nil || cfg.TimeFactorUnderLoad != 2.5 || cfg.MaxNumSeqs != 8 || cfg.PrefillPerToken != 200*time.Microsecond {
		t.Fatalf("cfg %+v, %v", cfg, err)
	}
	for _, bad := range []string{"0.5", "NaN", "+Inf"} {
		_, _, err = parseFlags([]string{"--time-factor-under-load", bad}, &out)
		if err == nil || !strings.HasPrefix(err.Error(), "sim: --time-factor-under-load must be a number >= 1, got ") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

// TTFT = --ttft + uncached prompt tokens × --prefill-per-token: turn 1
// (50 tokens, none cached) waits 100 + 50 ms, turn 2 (61 tokens, 48
// cached) 100 + 13 ms.
func TestPrefillPerToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PrefixCacheTokens: 1024, PrefillPerToken: time.Millisecond, TTFT: 100 * time.Millisecond, ITL: 10 * time.Millisecond})
		sys, user1 := [2]string{"system", words("s", 40)}, [2]string{"user", words("u", 10)}
		turn1 := strings.Replace(chatMessages(sys, user1), `"max_tokens":4`, `"max_tokens":2,"stream":true`, 1)
		turn2 := strings.Replace(chatMessages(sys, user1, [2]string{"assistant", "tok0 tok1"}, [2]string{"user", words("v", 9)}),
			`"max_tokens":4`, `"max_tokens":2,"stream":true`, 1)
		for i, c := range []struct {
			body string
			want []time.Duration
		}{
			{turn1, ms(150, 150, 160, 160, 160)}, // role, tok0, tok1, finish, [DONE]
			{turn2, ms(113, 113, 123, 123, 123)},
		} {
			t0 := time.Now()
			rec := serve(t.Context(), s, "POST", "/v1/chat/completions", c.body, nil)
			if got := writeTimes(rec, t0); !slices.Equal(got, c.want) {
				t.Errorf("turn %d: writes at %v, want %v", i+1, got, c.want)
			}
		}
	})
}

// The prefill counts every prompt token when the cache is off, and the
// load factor applies to the whole TTFT: with F = 3 and a full batch of
// two, (100 + 50·1 ms)·3 = 450 ms. The token comes at the end of the
// engine step in progress then: the other request's first token (101
// ms) anchored the steps, 30 ms each in a full batch, so at 461 ms.
func TestPrefillTimesLoadFactor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{MaxNumSeqs: 2, TimeFactorUnderLoad: 3, PrefillPerToken: time.Millisecond, TTFT: 100 * time.Millisecond, ITL: 10 * time.Millisecond})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go serve(ctx, s, "POST", "/v1/completions", `{"prompt":"a","max_tokens":100}`, nil)
		synctest.Wait()
		t0 := time.Now()
		rec := serve(t.Context(), s, "POST", "/v1/completions", `{"prompt":`+quote(words("p", 50))+`,"max_tokens":1}`, nil)
		if d := time.Since(t0); d != 461*time.Millisecond || rec.Code != 200 {
			t.Fatalf("took %v (status %d), want 461ms", d, rec.Code)
		}
	})
}
