package faults

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// exchange is one request's answer as a client sees it.
type exchange struct {
	what   string
	status int
	header http.Header
	body   string
}

func (h *harness) do(t *testing.T, what, method, url, auth, body string) exchange {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return exchange{what: what, status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// TestSecretsNeverLeak drives a gateway with a known API key and admin
// token through good and bad requests, then requires that neither secret
// appears in any log line, the /metrics scrape, or any response (body or
// header), and that an unknown key learns nothing a wrong key would not.
func TestSecretsNeverLeak(t *testing.T) {
	h := newHarness(t)
	gen := h.url + "/v1/chat/completions"
	admin := "http://" + h.app.AdminAddr()
	var seen []exchange
	add := func(x exchange, want int) exchange {
		t.Helper()
		if x.status != want {
			t.Errorf("%s: status %d, want %d: %s", x.what, x.status, want, x.body)
		}
		seen = append(seen, x)
		return x
	}
	add(h.do(t, "good key", "POST", gen, "Bearer "+legitKey, chatBody("hi", 4)), 200)
	add(h.do(t, "good key, upstream stall", "POST", gen, "Bearer "+legitKey, chatBody(markStall, 4)), 200)
	add(h.do(t, "good key, not streamed", "POST", gen, "Bearer "+legitKey, `{"model":"sim-model","messages":[{"role":"user","content":"hi"}]}`), 200)
	add(h.do(t, "good key, bad JSON", "POST", gen, "Bearer "+legitKey, `{"model":`), 400)
	unknown := add(h.do(t, "unknown key", "POST", gen, "Bearer sk-nobody-9999", chatBody("hi", 4)), 401)
	wrongKeys := []exchange{
		add(h.do(t, "known key plus a byte", "POST", gen, "Bearer "+legitKey+"x", chatBody("hi", 4)), 401),
		add(h.do(t, "known key less a byte", "POST", gen, "Bearer "+legitKey[:len(legitKey)-1], chatBody("hi", 4)), 401),
		add(h.do(t, "admin token as API key", "POST", gen, "Bearer "+adminToken, chatBody("hi", 4)), 401),
		add(h.do(t, "lower-case scheme, wrong key", "POST", gen, "bearer "+faultyKey+"y", chatBody("hi", 4)), 401),
	}
	add(h.do(t, "no key", "POST", gen, "", chatBody("hi", 4)), 401)
	add(h.do(t, "API key as admin token", "GET", admin+"/metrics", "Bearer "+legitKey, ""), 401)
	add(h.do(t, "admin token plus a byte", "GET", admin+"/metrics", "Bearer "+adminToken+"x", ""), 401)
	add(h.do(t, "admin token less a byte", "GET", admin+"/admin/buckets", "Bearer "+adminToken[:len(adminToken)-1], ""), 401)
	add(h.do(t, "no admin token", "GET", admin+"/metrics", "", ""), 401)
	metrics := add(h.do(t, "metrics scrape", "GET", admin+"/metrics", "Bearer "+adminToken, ""), 200)
	if !strings.Contains(metrics.body, "pacegate_") {
		t.Fatalf("the scrape has no pacegate metrics:\n%.500s", metrics.body)
	}
	add(h.do(t, "admin listing", "GET", admin+"/admin/buckets", "Bearer "+adminToken, ""), 200)

	logs := h.logs.String()
	if !strings.Contains(logs, `"msg":"request"`) {
		t.Fatalf("no request log lines were captured:\n%.500s", logs)
	}
	for _, secret := range []string{legitKey, faultyKey, adminToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("a log line carries the secret %q", secret)
		}
		for _, x := range seen {
			if strings.Contains(x.body, secret) || strings.Contains(headerText(x.header), secret) {
				t.Errorf("%s: the response carries the secret %q", x.what, secret)
			}
		}
	}
	// An unknown key and a wrong key for a known tenant get the same 401.
	for _, x := range wrongKeys {
		if x.body != unknown.body || headerText(x.header) != headerText(unknown.header) {
			t.Errorf("%s answered\n%s%s\nan unknown key\n%s%s", x.what, headerText(x.header), x.body,
				headerText(unknown.header), unknown.body)
		}
	}
	const want401 = `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	if unknown.body != want401 {
		t.Errorf("unknown key: %s\nwant %s", unknown.body, want401)
	}
}

// headerText renders h without the headers that differ per request.
func headerText(h http.Header) string {
	var lines []string
	for k, vs := range h {
		if k == "X-Request-Id" || k == "Date" {
			continue
		}
		lines = append(lines, k+": "+strings.Join(vs, ", "))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// An unknown tenant learns nothing about known ones: the 401 for an
// unknown key is byte for byte the 401 for a malformed key, a near miss
// of a known key, or a known key of the admin side. (The lookup itself
// is a Go map lookup on the key's SHA-256, policy.Quotas.Authenticate:
// how long it takes does not depend on how close the key is to a real
// one.) Only a request with no key at all is told so, which says nothing
// about any tenant.
func TestUnknownKeyLearnsNothing(t *testing.T) {
	h := newHarness(t)
	gen := h.url + "/v1/chat/completions"
	const want401 = `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	ref := h.do(t, "unknown key", "POST", gen, "Bearer sk-nobody-0000000000", chatBody("hi", 4))
	if ref.status != http.StatusUnauthorized || ref.body != want401 {
		t.Fatalf("unknown key: %d %s\nwant 401 %s", ref.status, ref.body, want401)
	}
	for _, auth := range []string{
		"Bearer x",                                   // too short to be a key
		"Bearer " + strings.Repeat("A", 4096),        // far too long
		"Bearer sk-%%%%;;;,,,\"\"",                   // punctuation
		"Bearer \u00e9\u00e8\u4e2d\u6587",            // not ASCII
		"Bearer sk-legit 5b2e91d07c",                 // a space inside
		"Bearer " + legitKey[:8],                     // a known key's prefix
		"Bearer " + strings.ToUpper(legitKey),        // a known key, other case
		"Bearer " + legitKey[:len(legitKey)-1] + "d", // a known key, its last byte changed
		"Bearer " + adminToken,                       // the admin token
		"bearer sk-nobody-0000000000",                // lower-case scheme
		"Bearer   sk-nobody-0000000000  ",            // padded
	} {
		x := h.do(t, auth, "POST", gen, auth, chatBody("hi", 4))
		if x.status != ref.status || x.body != ref.body || headerText(x.header) != headerText(ref.header) {
			t.Errorf("%q answered %d\n%s%s\nan unknown key %d\n%s%s", auth, x.status, headerText(x.header), x.body,
				ref.status, headerText(ref.header), ref.body)
		}
	}
}
