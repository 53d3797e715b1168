package vllmsim

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
)

// audioBytesPerSecond reads an upload as 16 kHz 16-bit mono PCM: its
// duration is its size over this.
const audioBytesPerSecond = 32000

// audioOut renders /v1/audio/transcriptions and /v1/audio/translations.
type audioOut struct {
	j        *job
	object   string // transcription.chunk or translation.chunk
	format   string // json, text or verbose_json
	language string
	seconds  float64
}

// audio serves a speech-to-text route; translate picks translations.
func (s *Server) audio(translate bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		j, e := s.parseAudio(r, translate)
		if e != nil {
			e.write(w)
			return
		}
		s.run(w, r, j)
	}
}

func (s *Server) parseAudio(r *http.Request, translate bool) (*job, *apiError) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return nil, badRequest("Unsupported Media Type: Only 'multipart/form-data' is allowed", nil)
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxRequestBytes))
	if err != nil {
		return nil, badRequest("Could not read the request body: "+err.Error(), nil)
	}
	form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(maxRequestBytes)
	if err != nil {
		return nil, badRequest("Invalid multipart form: "+err.Error(), nil)
	}
	defer func() { _ = form.RemoveAll() }()
	field := func(k string) string {
		if v := form.Value[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	j, e := s.newJob(r, field("model"), body)
	if e != nil {
		return nil, e
	}
	o := &audioOut{j: j, object: "transcription.chunk", format: field("response_format"), language: field("language")}
	j.respID = quote("trsc-" + j.id)
	if translate {
		o.object, j.respID = "translation.chunk", quote("trsl-"+j.id)
	}
	j.out = o
	if e := o.readFile(form); e != nil {
		return nil, e
	}
	if e := o.options(field); e != nil {
		return nil, e
	}
	j.promptTokens = len(strings.Fields(field("prompt")))
	j.maxTokens = s.cfg.DefaultMaxTokens
	if v := field("max_completion_tokens"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, badRequest(fmt.Sprintf("max_completion_tokens must be at least 1, got %s.", v), ptr("max_completion_tokens"))
		}
		j.maxTokens = n
	}
	return j, nil
}

// readFile measures the uploaded file.
func (o *audioOut) readFile(form *multipart.Form) *apiError {
	files := form.File["file"]
	if len(files) == 0 {
		return badRequest("Field required: file.", ptr("body.file"))
	}
	if files[0].Size == 0 {
		return badRequest("The audio file is empty.", ptr("file"))
	}
	o.seconds = float64(files[0].Size) / audioBytesPerSecond
	return nil
}

// options reads response_format, language and the stream fields.
func (o *audioOut) options(field func(string) string) *apiError {
	switch o.format {
	case "":
		o.format = "json"
	case "json", "text", "verbose_json":
	default:
		return badRequest(fmt.Sprintf("Unsupported response_format %q: use json, text or verbose_json.", o.format), ptr("response_format"))
	}
	if o.language == "" {
		o.language = "en"
	}
	o.j.stream = field("stream") == "true"
	o.j.includeUsage = field("stream_include_usage") == "true"
	if o.j.includeUsage && !o.j.stream {
		return badRequest("Stream options can only be defined when `stream=True`.", ptr("stream_include_usage"))
	}
	if o.format == "text" {
		o.j.contentType = "text/plain; charset=utf-8"
	}
	return nil
}

func (o *audioOut) chunkHead() []byte {
	b := []byte(`{"id":` + o.j.respID + `,"object":"` + o.object + `","created":` + strconv.FormatInt(o.j.created, 10) + `,"model":` + o.j.model)
	return append(b, `,"choices":`...)
}

func (o *audioOut) head() []frame { return nil }

// token is a delta chunk; the last one carries finish_reason, as vLLM
// sends it.
func (o *audioOut) token(i int) []frame {
	b := append(o.chunkHead(), `[{"delta":{"content":`...)
	b = append(b, quote(tokenText(i, o.j.maxTokens))...)
	if i == o.j.maxTokens-1 {
		b = append(b, `},"finish_reason":"length","stop_reason":null}]}`...)
	} else {
		b = append(b, `}}]}`...)
	}
	return []frame{{data: b}}
}

func (o *audioOut) tail() []frame {
	var f []frame
	if o.j.includeUsage {
		b := append(o.chunkHead(), `[],"usage":`...)
		f = append(f, frame{data: append(appendUsage(b, o.j, false), '}')})
	}
	return append(f, frame{data: doneData, terminal: true})
}

func (o *audioOut) full() []byte {
	text := quote(completionText(o.j.maxTokens))
	switch o.format {
	case "text":
		return []byte(unquote(text))
	case "verbose_json":
		return []byte(`{"duration":` + quote(pyFloat(o.seconds)) + `,"language":` + quote(o.language) + `,"text":` + text + `,"segments":null,"words":null}`)
	}
	return []byte(`{"text":` + text + `,"usage":{"type":"duration","seconds":` + strconv.Itoa(int(math.Ceil(o.seconds))) + `}}`)
}

func (o *audioOut) writeError(w http.ResponseWriter, e *apiError) { e.write(w) }

// pyFloat formats f as Python's str(float) does for ordinary values.
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
