// Package gateway is pacegate's HTTP side: the OpenAI-compatible front
// door (chi), admission against the hard caps, publication of each request
// to its tenant+model LiteTopic, and the response path that turns the
// consumer's events back into SSE or JSON for the waiting client.
//
// A request's life:
//
//  1. auth: the bearer key names the tenant (401 otherwise);
//  2. parse: content type, size limit, JSON, model (400/404/413/415);
//  3. admit: fixed-window RPM/TPM per tenant+model and org, then the
//     burst check; tokens are reserved now and reconciled with the real
//     usage when the response ends (429 with Retry-After otherwise);
//  4. predicted wait: a bucket whose backlog would take longer than
//     max_wait to drain rejects at once (429 queue_full) instead of letting
//     the request time out later;
//  5. register a [consume.Pending] in the registry and publish;
//  6. wait: stream the consumer's events to the client, sending
//     ": queued position=N eta_ms=M" comments while the request waits,
//     until [DONE], an error event, or the overall timeout.
//
// The client's context is the request's context everywhere: when the
// client goes away the consumer drops the queued request, or the upstream
// call is cancelled so that vLLM aborts it and frees its KV cache.
package gateway
