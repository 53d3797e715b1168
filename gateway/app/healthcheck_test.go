package app

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer ok.Close()
	var out bytes.Buffer
	if err := Healthcheck(context.Background(), []string{ok.URL + "/healthz"}, noEnv, &out); err != nil || out.String() != "{\"status\":\"ok\"}\n" {
		t.Fatalf("Healthcheck = %v, %q", err, out.String())
	}
	err := Healthcheck(context.Background(), []string{ok.URL + "/nope"}, noEnv, &out)
	if err == nil || err.Error() != "healthcheck: GET "+ok.URL+"/nope: 404 Not Found 404 page not found\n" {
		t.Fatalf("Healthcheck on a 404 = %v", err)
	}
	if err := Healthcheck(context.Background(), []string{"a", "b"}, noEnv, &out); err == nil || err.Error() != `healthcheck: want at most one URL, got ["a" "b"]` {
		t.Fatalf("two arguments: %v", err)
	}
}

func TestHealthzURL(t *testing.T) {
	for env, want := range map[string]string{
		"":               "http://127.0.0.1:8080/healthz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/healthz",
		":9000":          "http://127.0.0.1:9000/healthz",
		"[::]:8080":      "http://127.0.0.1:8080/healthz",
		"10.0.0.5:8081":  "http://10.0.0.5:8081/healthz",
		"localhost:8080": "http://localhost:8080/healthz",
	} {
		lookup := func(string) (string, bool) { return env, env != "" }
		if got := healthzURL(lookup); got != want {
			t.Errorf("PACEGATE_LISTEN=%q: %s, want %s", env, got, want)
		}
	}
}
