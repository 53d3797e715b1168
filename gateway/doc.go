// Package gateway is pacegate's HTTP side: the vLLM API's front door
// (chi), admission against the hard caps, publication of each request to
// its tenant+model LiteTopic, and the response path that turns the
// consumer's events back into SSE or JSON for the waiting client.
//
// Every route is an entry of the route table (routes.go): its dialect
// (dialect.go: OpenAI or Anthropic, which decides the key header and the
// error shape in a body and inside a stream), its kind (queued like chat;
// direct, forwarded at once outside the bucket; or a follow-up of a
// stored response, pinned to the upstream that made it through the
// affinity map, affinity.go), the fields it checks and estimates, and
// what it reserves against TPM. The route families live in their own
// files: responses.go, messages.go, audio.go (multipart).
//
// Every request first passes three chi-style middleware (middleware.go):
// its id, its access log line (written even when the handler panics) and
// the recoverer that turns a panic into a 500 error body.
//
// A request's life reads straight down the handler (generate.go):
//
//  1. authenticate: the key names the tenant (401 otherwise);
//  2. parse: content type, size limit, JSON or multipart, model, the
//     route's own fields, a stored response's upstream (400/404/413/415,
//     503 while that upstream is down);
//  3. admit: fixed-window RPM/TPM per tenant+model and org, then the
//     burst check; tokens are reserved now and reconciled with the real
//     usage when the response ends (429 with Retry-After otherwise). A
//     bucket whose backlog would take longer than max_wait to drain is
//     refused at once (429 queue_full) instead of timing out later;
//  4. submit: the request goes to the [consume.Queue], which registers it
//     and publishes it to its LiteTopic (429 queue_full when the bucket
//     holds its backlog limit, 503 when the backend is unavailable); a
//     direct route is forwarded at once through the [Forwarder] instead;
//  5. respond: stream the consumer's events to the client, sending
//     ": queued position=N eta_ms=M" comments while the request waits,
//     until the stream's last event ([DONE], response.completed,
//     message_stop), an error event, the band's max_wait (429), the
//     overall timeout or a shutdown's cut.
//
// Steps 1 to 4 decide and never write: a refusal is an *APIError value,
// and refuse is the one function that writes every one of them.
//
// The client's context is the request's context everywhere: when the
// client goes away the consumer drops the queued request, or the upstream
// call is cancelled so that vLLM aborts it and frees its KV cache.
package gateway
