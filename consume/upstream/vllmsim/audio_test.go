package vllmsim

import (
	"strings"
	"testing"
)

// multipartBody is a form with the given fields and, unless size < 0, a
// file of size zero bytes; the boundary is "B".
func multipartBody(size int, fields ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(fields); i += 2 {
		b.WriteString("--B\r\nContent-Disposition: form-data; name=\"" + fields[i] + "\"\r\n\r\n" + fields[i+1] + "\r\n")
	}
	if size >= 0 {
		b.WriteString("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n" +
			"Content-Type: audio/wav\r\n\r\n" + strings.Repeat("\x00", size) + "\r\n")
	}
	b.WriteString("--B--\r\n")
	return b.String()
}

var multipartHdr = map[string]string{"X-Request-Id": "r1", "Content-Type": "multipart/form-data; boundary=B"}

func multipartFault(v string) map[string]string {
	return map[string]string{"X-Request-Id": "r1", "Content-Type": "multipart/form-data; boundary=B", "X-Sim-Fault": v}
}

func TestAudioGolden(t *testing.T) {
	const tr, tl = "/v1/audio/transcriptions", "/v1/audio/translations"
	runGolden(t, []routeCase{
		{name: "audio_json", path: tr, body: multipartBody(80000, "model", "sim-model", "max_completion_tokens", "3"), hdr: multipartHdr},
		{name: "audio_text", path: tr, body: multipartBody(100, "response_format", "text", "max_completion_tokens", "2"), hdr: multipartHdr},
		{name: "audio_verbose_json", path: tl, body: multipartBody(48000, "response_format", "verbose_json", "language", "de", "max_completion_tokens", "2"), hdr: multipartHdr},
		{name: "audio_stream_usage", path: tr, body: multipartBody(100, "prompt", "a b", "stream", "true", "stream_include_usage", "true", "max_completion_tokens", "2"), hdr: multipartHdr},
		{name: "audio_translation_stream", path: tl, body: multipartBody(100, "stream", "true", "max_completion_tokens", "2"), hdr: multipartHdr},
		{name: "audio_err_no_file", path: tr, body: multipartBody(-1, "model", "sim-model"), hdr: multipartHdr},
		{name: "audio_err_json_body", path: tr, body: `{"model":"sim-model"}`},
		{name: "audio_err_format", path: tr, body: multipartBody(10, "response_format", "srt"), hdr: multipartHdr},
		{name: "audio_err_stream_options", path: tr, body: multipartBody(10, "stream_include_usage", "true"), hdr: multipartHdr},
		{name: "fault_audio_no_done", path: tr, body: multipartBody(10, "stream", "true", "max_completion_tokens", "1"), hdr: multipartFault("no-done")},
		{name: "fault_audio_stall_after_1", path: tr, body: multipartBody(10, "stream", "true", "max_completion_tokens", "3"), hdr: multipartFault("stall-after=1")},
	})
}
