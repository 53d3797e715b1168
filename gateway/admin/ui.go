package admin

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
)

// indexHTML is the bucket matrix page: one self-contained file (inline
// CSS and vanilla JS, no CDN, no build step).
//
//go:embed ui/index.html
var indexHTML []byte

// uiCSP allows exactly the page's own inline script and style (by hash),
// and fetches to this origin only: nothing else can run or be loaded,
// and the token can only ever be sent back here.
var uiCSP = "default-src 'none'; script-src " + inlineHash("script") + "; style-src " + inlineHash("style") +
	"; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash returns the CSP source of the page's one <tag> element.
func inlineHash(tag string) string {
	_, after, ok1 := bytes.Cut(indexHTML, []byte("<"+tag+">"))
	body, _, ok2 := bytes.Cut(after, []byte("</"+tag+">"))
	if !ok1 || !ok2 {
		panic("admin: ui/index.html has no <" + tag + "> element")
	}
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// serveUI serves the page. It carries no data, so it needs no token: the
// page asks for the token and sends it as a bearer header on each API
// call.
func serveUI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(indexHTML)
}
