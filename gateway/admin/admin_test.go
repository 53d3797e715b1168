package admin

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestAuth(t *testing.T) { synctest.Test(t, testAuth) }

func testAuth(t *testing.T) {
	f := newFixture(t)
	const unauthorized = `{"error":{"message":"Missing or invalid admin token.","type":"invalid_request_error","param":null,"code":"invalid_admin_token"}}` + "\n"
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Basic " + testToken, "Bearer " + testToken + "x", "bearer " + testToken} {
		code, body := f.doAuth(http.MethodGet, "/admin/factors", "", auth)
		if code != http.StatusUnauthorized || body != unauthorized {
			t.Errorf("auth %q: got %d %s", auth, code, body)
		}
		time.Sleep(DefaultAuthRefill) // each wrong token alone: none is slowed down
	}
	if code, _ := f.doAuth(http.MethodGet, "/admin/factors", "", "Bearer "+testToken); code != http.StatusOK {
		t.Errorf("right token: got %d", code)
	}
	code, body := f.doAuth(http.MethodGet, "/admin/ui", "", "")
	if code != http.StatusOK || !strings.HasPrefix(body, "<!doctype html>") {
		t.Errorf("/admin/ui without token: got %d %.40s", code, body)
	}
}

func TestNewPanicsWithoutToken(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New without a token did not panic")
		}
	}()
	New(Config{})
}

func TestUnknownPathAndMethod(t *testing.T) {
	f := newFixture(t)
	f.expect(http.MethodGet, "/admin/nope", "", 404,
		`{"error":{"message":"Unknown path /admin/nope.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`)
	f.expect(http.MethodPost, "/admin/factors", "", 405,
		`{"error":{"message":"Method POST is not allowed on /admin/factors.","type":"invalid_request_error","param":null,"code":null}}`)
}
