// Package sse reads and writes Server-Sent Events, the framing of
// OpenAI-style streamed responses.
//
// An event is a block of "field: value" lines ended by a blank line:
//
//	event: name      (optional; empty means "message")
//	data: {"json"}   (one or more; several data lines join with "\n")
//	id: 7            (optional)
//	retry: 3000      (optional; reconnection time in milliseconds)
//	: comment        (ignored by clients; used as a keep-alive)
//
// Lines may end in LF, CR or CRLF. An OpenAI-compatible stream is a run of
// "data: <json>\n\n" events ended by "data: [DONE]\n\n".
//
// [Decoder] parses a stream incrementally from any io.Reader and yields
// the same events however the input is split across reads; its Borrow
// method lends the event's data instead of copying it, for a relay that
// passes each event on before reading the next, and an event that came
// in the frame a Writer would give it also lends that frame
// ([Event.Raw]), which [Writer.Frame] sends as it is. [Writer]
// frames events onto an http.ResponseWriter and flushes every one of
// them: a token sitting in a proxy or kernel buffer is latency the client
// sees, and an unflushed keep-alive keeps nothing alive. The one
// exception is [Writer.FrameHeld], for an event whose successor has
// already arrived ([Decoder.Peek] says so): both go out in one write,
// and neither waits for anything.
package sse
