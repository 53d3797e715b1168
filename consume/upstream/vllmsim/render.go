package vllmsim

import "net/http"

// frame is one server-sent event: "event: <event>\n" (when event is not
// empty) and "data: <data>\n\n". terminal marks the event that ends a
// stream cleanly ("data: [DONE]", response.completed, message_stop),
// which the no-done fault leaves out.
type frame struct {
	event    string
	data     []byte
	terminal bool
}

// renderer is how one route writes its response; the timing, slots and
// faults around it are shared ([Server.run]). A renderer is created per
// request and is not safe for concurrent use.
type renderer interface {
	// head is sent just before the first token's frames.
	head() []frame
	// token is token i of the completion.
	token(i int) []frame
	// tail follows the last token; its last frame is terminal.
	tail() []frame
	// full is the non-streamed body.
	full() []byte
	// writeError writes e in the route's error shape.
	writeError(w http.ResponseWriter, e *apiError)
}

// finisher is a renderer that wants to know when its response was
// generated in full (Responses stores it).
type finisher interface {
	finished()
}

// chatOut renders /v1/chat/completions and /v1/completions.
type chatOut struct{ j *job }

func (o chatOut) head() []frame {
	if o.j.chat {
		return []frame{{data: roleChunk(o.j)}}
	}
	return nil
}

func (o chatOut) token(i int) []frame { return []frame{{data: tokenChunk(o.j, i)}} }

func (o chatOut) tail() []frame {
	f := []frame{{data: finishChunk(o.j)}}
	if o.j.includeUsage {
		f = append(f, frame{data: usageChunk(o.j)})
	}
	return append(f, frame{data: doneData, terminal: true})
}

func (o chatOut) full() []byte { return fullResponse(o.j) }

func (o chatOut) writeError(w http.ResponseWriter, e *apiError) { e.write(w) }

// unstreamed is embedded by the renderers of routes that never stream
// and answer errors in the OpenAI shape.
type unstreamed struct{}

func (unstreamed) head() []frame                                 { return nil }
func (unstreamed) token(int) []frame                             { return nil }
func (unstreamed) tail() []frame                                 { return nil }
func (unstreamed) writeError(w http.ResponseWriter, e *apiError) { e.write(w) }
