package vllmsim

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"
)

// statusOf reads "status" (and "usage") of a response object.
func statusOf(t *testing.T, body string) string {
	t.Helper()
	var r struct {
		Status string          `json:"status"`
		Usage  json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return r.Status + " " + string(r.Usage)
}

// A background response is answered queued at once, waits for a slot,
// runs and completes on the timing model; GET shows each state.
func TestResponsesBackgroundLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{MaxNumSeqs: 1, TTFT: 100 * time.Millisecond, ITL: 10 * time.Millisecond})
		defer s.Close()
		// A chat request holds the only slot for 100ms.
		go serve(context.Background(), s, "POST", "/v1/chat/completions", chatBody(`,"max_tokens":1`), nil)
		synctest.Wait()
		t0 := time.Now()
		created := serve(t.Context(), s, "POST", "/v1/responses", `{"input":"a b","max_output_tokens":3,"background":true}`, reqID)
		if created.Code != 200 || time.Since(t0) != 0 {
			t.Fatalf("create: %d after %v: %s", created.Code, time.Since(t0), created.Body)
		}
		steps := []struct {
			at   time.Duration
			want string
		}{
			{0, "queued null"},
			{100 * time.Millisecond, "in_progress null"},
			{219 * time.Millisecond, "in_progress null"},
			{220 * time.Millisecond, `completed {"input_tokens":2,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":5}`},
		}
		if got := statusOf(t, created.Body.String()); got != steps[0].want {
			t.Errorf("create body status %q, want %q", got, steps[0].want)
		}
		for i, st := range steps {
			time.Sleep(time.Until(t0.Add(st.at)))
			synctest.Wait()
			rec := serve(t.Context(), s, "GET", "/v1/responses/resp_r1", "", nil)
			if got := statusOf(t, rec.Body.String()); rec.Code != 200 || got != st.want {
				t.Errorf("step %d at %v: %d %q, want %q", i, st.at, rec.Code, got, st.want)
			}
		}
		rec := serve(t.Context(), s, "POST", "/v1/responses/resp_r1/cancel", "", nil)
		if rec.Code != 400 {
			t.Errorf("cancel after completion: %d %s", rec.Code, rec.Body)
		}
		if st := s.Stats(); st.Completed != 2 || st.Running != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// Cancel stops a running background response: it answers the cancelled
// response, GET shows it, the slot is freed and the abort reported.
func TestResponsesBackgroundCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: time.Second})
		defer s.Close()
		serve(t.Context(), s, "POST", "/v1/responses", `{"input":"a b","background":true}`, reqID)
		time.Sleep(500 * time.Millisecond)
		steps := []struct {
			method, path string
			code         int
			want         string
		}{
			{"POST", "/v1/responses/resp_r1/cancel", 200, "cancelled null"},
			{"GET", "/v1/responses/resp_r1", 200, "cancelled null"},
			{"POST", "/v1/responses/resp_r1/cancel", 400, ""},
		}
		for i, st := range steps {
			rec := serve(t.Context(), s, st.method, st.path, "", nil)
			if rec.Code != st.code || (st.want != "" && statusOf(t, rec.Body.String()) != st.want) {
				t.Errorf("step %d: %s %s = %d %s; want %d %s", i, st.method, st.path, rec.Code, rec.Body, st.code, st.want)
			}
		}
		synctest.Wait()
		if st := s.Stats(); st.Aborted != 1 || st.Running != 0 || st.Completed != 0 {
			t.Errorf("stats %+v", st)
		}
		if a := <-s.Aborts(); a.ID != "r1" || a.Queued {
			t.Errorf("abort %+v", a)
		}
	})
}

// Close cancels background responses, waits for them, and refuses new
// ones; background needs store and cannot stream.
func TestResponsesBackgroundClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{TTFT: time.Hour})
		serve(t.Context(), s, "POST", "/v1/responses", `{"input":"x","background":true}`, reqID)
		s.Close()
		s.Close()
		steps := []struct {
			method, path, body string
			code               int
			want               string
		}{
			{"GET", "/v1/responses/resp_r1", "", 200, `"status":"cancelled"`},
			{"POST", "/v1/responses", `{"input":"x","background":true}`, 503, `{"error":{"message":"The simulator is closed.","type":"ServiceUnavailableError","param":null,"code":503}}`},
			{"POST", "/v1/responses", `{"input":"x","background":true,"stream":true}`, 400, `{"error":{"message":"The simulator does not stream background responses.","type":"BadRequestError","param":"stream","code":400}}`},
			{"POST", "/v1/responses", `{"input":"x","background":true,"store":false}`, 400, "background can only be used when `store` is true"},
		}
		for i, st := range steps {
			rec := serve(t.Context(), s, st.method, st.path, st.body, map[string]string{"X-Request-Id": "r2"})
			if rec.Code != st.code || !contains(rec.Body.String(), st.want) {
				t.Errorf("step %d: %d %s; want %d %s", i, rec.Code, rec.Body, st.code, st.want)
			}
		}
	})
}
