package vllmsim

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestFaultGolden compares each faulty response with testdata/fault_<case>.out.
// A stalled request is ended by its ctx after 10 s of bubble time.
func TestFaultGolden(t *testing.T) {
	for _, tc := range []struct{ name, fault string }{
		{"garbage_sse", "garbage-sse"},
		{"truncated_json", "truncated-json"},
		{"no_done", "no-done"},
		{"stall_after_2", "stall-after=2"},
		{"status_503", "status=503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{})
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				hdr := map[string]string{"X-Request-Id": "r1", "X-Sim-Fault": tc.fault}
				rec := serve(ctx, s, "POST", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":2`), hdr)
				got := fmt.Sprintf("%d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
				checkGolden(t, filepath.Join("testdata", "fault_"+tc.name+".out"), got)
				if st := s.Stats(); st.Failed != 1 {
					t.Errorf("stats %+v: want Failed 1", st)
				}
			})
		})
	}
}

// A stall holds the request until its client leaves, and counts it as
// aborted.
func TestFaultStallEndsWithClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		t0 := time.Now()
		rec := serve(ctx, s, "POST", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":4`),
			map[string]string{"X-Sim-Fault": "stall-after=3"})
		if d := time.Since(t0); d != time.Hour {
			t.Errorf("returned after %v, want 1h", d)
		}
		if n := strings.Count(rec.Body.String(), "data: "); n != 3 {
			t.Errorf("%d data events, want 3", n)
		}
		if st := s.Stats(); st.Aborted != 1 || st.Completed != 0 || st.Running != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestFaultSlowHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: 100 * time.Millisecond})
		t0 := time.Now()
		rec := serve(t.Context(), s, "POST", "/v1/chat/completions", chatBody(`,"stream":true,"max_tokens":1`),
			map[string]string{"X-Sim-Fault": "slow-headers=2s"})
		if got := rec.writes[0].at.Sub(t0); got != 2100*time.Millisecond {
			t.Errorf("first event at %v, want 2.1s", got)
		}
		if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
			t.Errorf("body %q", rec.Body)
		}
	})
}

func TestFaultNonStreamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: -1, ITL: -1})
		full := serve(t.Context(), s, "POST", "/v1/chat/completions", chatBody(`,"max_tokens":2`), reqID).Body.String()
		cut := serve(t.Context(), s, "POST", "/v1/chat/completions", chatBody(`,"max_tokens":2`),
			map[string]string{"X-Request-Id": "r1", "X-Sim-Fault": "truncated-json"}).Body.String()
		if cut != full[:len(full)/2] {
			t.Errorf("truncated body %q, want the first half of %q", cut, full)
		}
	})
}

// Rules match a marker in the body, skip After, then apply Count times;
// a skipped request falls through to the next rule.
func TestFaultRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: -1, ITL: -1, Faults: []FaultRule{
			{Match: "MARK", After: 1, Count: 2, Fault: Fault{Status: 503}},
			{Count: 1, Fault: Fault{Status: 500}},
		}})
		var got []int
		for _, content := range []string{"MARK a", "b", "MARK c", "MARK d", "MARK e", "f"} {
			body := `{"messages":[{"role":"user","content":"` + content + `"}],"max_tokens":1}`
			got = append(got, serve(t.Context(), s, "POST", "/v1/chat/completions", body, nil).Code)
		}
		want := []int{500, 200, 503, 503, 200, 200} // "MARK a" is skipped by rule 0 and taken by rule 1
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("statuses %v, want %v", got, want)
		}
	})
}

func TestParseFault(t *testing.T) {
	for _, c := range []struct {
		in, want, err string
	}{
		{"stall-after=3", "{Stall:true StallAfter:3}", ""},
		{" slow-headers=2s , no-done ", "{SlowHeaders:2s NoDone:true}", ""},
		{"garbage-sse,truncated-json,status=503", "{Status:503 GarbageSSE:true TruncatedJSON:true}", ""},
		{"status=42", "", `vllmsim: fault "status=42": want a status 100..999`},
		{"stall-after=-1", "", `vllmsim: fault "stall-after=-1": want an integer >= 0`},
		{"slow-headers=soon", "", `vllmsim: fault "slow-headers=soon": want a duration >= 0`},
		{"explode", "", `vllmsim: unknown fault "explode"`},
	} {
		f, err := ParseFault(c.in)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("ParseFault(%q) error %v, want %s", c.in, err, c.err)
			}
			continue
		}
		if err != nil || describe(f) != c.want {
			t.Errorf("ParseFault(%q) = %s, %v; want %s", c.in, describe(f), err, c.want)
		}
	}
	r, err := ParseFaultRule("status=503,count=5,after=2,match=X")
	if err != nil || r != (FaultRule{Match: "X", After: 2, Count: 5, Fault: Fault{Status: 503}}) {
		t.Errorf("ParseFaultRule = %+v, %v", r, err)
	}
}

// A bad X-Sim-Fault header is the client's mistake: 400, nothing run.
func TestBadFaultHeader(t *testing.T) {
	s := New(Config{})
	rec := serve(t.Context(), s, "POST", "/v1/chat/completions", chatBody(""), map[string]string{"X-Sim-Fault": "explode"})
	want := `{"error":{"message":"vllmsim: unknown fault \"explode\"","type":"BadRequestError","param":null,"code":400}}`
	if rec.Code != 400 || rec.Body.String() != want {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}

// describe prints the set fields of f.
func describe(f Fault) string {
	var parts []string
	add := func(cond bool, s string) {
		if cond {
			parts = append(parts, s)
		}
	}
	add(f.Status != 0, fmt.Sprintf("Status:%d", f.Status))
	add(f.SlowHeaders != 0, fmt.Sprintf("SlowHeaders:%s", f.SlowHeaders))
	add(f.Stall, fmt.Sprintf("Stall:true StallAfter:%d", f.StallAfter))
	add(f.GarbageSSE, "GarbageSSE:true")
	add(f.TruncatedJSON, "TruncatedJSON:true")
	add(f.NoDone, "NoDone:true")
	return "{" + strings.Join(parts, " ") + "}"
}

// `pacegate sim --fault` adds rules in order; a bad one is an error.
func TestFaultFlag(t *testing.T) {
	var out strings.Builder
	cfg, _, err := parseFlags([]string{"--fault", "status=503,count=5", "--fault", "stall-after=3,match=FAULT-STALL"}, &out)
	want := []FaultRule{{Count: 5, Fault: Fault{Status: 503}}, {Match: "FAULT-STALL", Fault: Fault{Stall: true, StallAfter: 3}}}
	if err != nil || len(cfg.Faults) != 2 || cfg.Faults[0] != want[0] || cfg.Faults[1] != want[1] {
		t.Fatalf("faults %+v, %v; want %+v", cfg.Faults, err, want)
	}
	_, _, err = parseFlags([]string{"--fault", "explode"}, &out)
	if err == nil || err.Error() != `invalid value "explode" for flag -fault: vllmsim: unknown fault "explode"` {
		t.Fatalf("error %v", err)
	}
}
