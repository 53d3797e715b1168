// Package vllmsim is a simulated vLLM OpenAI-compatible server: exact,
// deterministic and cheap, for tests, benchmarks and `pacegate sim`.
//
// It serves POST /v1/chat/completions and /v1/completions (streamed and
// not), GET /v1/models, /health and /metrics, with vLLM's wire format and
// error shapes, and the Responses, embeddings, Anthropic Messages,
// rerank, score, tokenizer and audio routes listed under "Other routes".
// What it generates is fixed so that tests can compare bytes:
//
//   - The completion has exactly max_tokens tokens (max_completion_tokens
//     wins over max_tokens; neither means Config.DefaultMaxTokens). Token
//     i is the word "tok<i>" followed by a space, except the last one: three
//     tokens read "tok0 tok1 tok2". finish_reason is always "length".
//   - prompt_tokens is the number of whitespace-separated words across
//     all message contents (text parts included), or across the prompt(s)
//     of a completion; a prompt given as token ids counts its ids.
//     usage is {"prompt_tokens","total_tokens","completion_tokens"}, plus
//     "prompt_tokens_details": null in a non-streamed body; with the
//     prefix cache on, both forms carry "prompt_tokens_details":
//     {"cached_tokens":n} instead (see "Prefix cache").
//   - Response ids are "chatcmpl-<X-Request-Id>" and "cmpl-<X-Request-Id>",
//     with a random hex id when the header is absent. "created" is the
//     Unix time at which the request arrived.
//   - n, temperature, stop and other sampling fields are accepted and
//     ignored: there is always one choice.
//
// Timing follows vLLM's scheduler in miniature: at most MaxNumSeqs
// requests run at once, the rest wait in FIFO order. A streamed response
// sends its headers at once (as vLLM does), then after TTFT from the
// start of running the role chunk and the first token, then one token
// every ITL, the finish chunk, the usage chunk (only when
// stream_options.include_usage is true; `"stream_options":{}` counts as
// true, as in vLLM) and "data: [DONE]". A non-streamed response is sent
// when the last token would have been. The first token's delay is
//
//	(TTFT + uncached prompt tokens × Config.PrefillPerToken) × load factor
//
// and each next token's is ITL × load factor, where the load factor is
// 1 + (F-1)·(running-1)/(MaxNumSeqs-1) with F = Config.TimeFactorUnderLoad
// (1, the default, turns it off), read from the running count (the
// request included) when that token is scheduled: as the request joins
// the batch for the first, after the previous token for each next one, as
// llm-d-inference-sim models it. As in vLLM, whose every engine step
// produces a token for each running request, the tokens of concurrent
// requests come together: a token is produced at the end of the engine
// step in progress when it is due, steps last ITL × load factor, and the
// first token due while no step runs starts them (see steps.go), so a
// request alone sees exactly the delays above. Config.OwnClocks gives
// each request a clock of its own instead. /metrics exports the gaps
// between tokens as vllm:inter_token_latency_seconds (its sum and count, one
// +Inf bucket), from which pacegate learns how the batch slows the
// server. Every prompt token is uncached without
// the prefix cache, and on the routes it does not serve (embeddings,
// rerank, score, audio).
//
// Unlike llm-d-inference-sim, the simulator aborts a request the moment
// its client goes away, while waiting, during TTFT or between tokens, and
// reports it on [Server.Aborts], as vLLM frees its KV cache.
//
// Faults make responses misbehave on purpose, for the gateway's fault
// suite: per request with the X-Sim-Fault header (stall-after=N,
// garbage-sse, truncated-json, no-done, slow-headers=D, status=N), or for
// a whole run with Config.Faults rules keyed by a marker in the prompt
// (`pacegate sim --fault stall-after=3,match=FAULT-STALL`). See [Fault].
// X-Sim-Fail-Status and [Server.InjectFailure] (a 5xx burst: the next N
// requests fail) remain. A request without a fault is answered exactly
// as described above.
//
// # Prefix cache
//
// With Config.PrefixCacheTokens N (`--prefix-cache-tokens`), each
// simulator keeps a cache of N/16 blocks of 16 tokens, as vLLM's
// automatic prefix caching, for chat, completions, Responses and
// Messages (the served model names are aliases of one model and share
// it). A prompt is laid out in a fixed order: chat: tools, then each
// message's role and content; completions: the prompt(s); Responses: the
// instructions, then for a follow-up each previous turn's input and
// output, then the input; Messages: system, tools, messages. Its tokens
// are the words counted above; roles, tools, non-text parts and message
// boundaries are hashed as markers between them, never counted, so that
// cached tokens never exceed prompt_tokens. Block i's key is a 64-bit
// FNV-1a over everything up to its last token, so it chains the blocks
// before it; only the first N/16 blocks are hashed.
//
// When a request starts running, its cached tokens are 16 × the longest
// run of its leading blocks found in the cache, excluding the block of
// its last token (vLLM always computes the last token). Those blocks are
// pinned while it runs; when its first token is out (the prefill done)
// its prompt's full blocks are added, evicting the least recently
// released blocks no running request holds (none free: the rest are not
// cached); when it ends they are released last one first, so a prompt's
// tail is evicted before its head. /metrics counts
// vllm:prefix_cache_queries_total (prompt tokens looked up) and
// vllm:prefix_cache_hits_total (cached tokens), reports
// vllm:cache_config_info{block_size="16",enable_prefix_caching="True",
// num_gpu_blocks="<N/16>"} 1, and vllm:kv_cache_usage_perc becomes the
// blocks running requests hold (the cached ones they use, and their
// prompt and output so far outside the cache) / (N/16), at most 1; a
// cached block nobody holds is free, as vLLM counts it (without the
// cache it is running/MaxNumSeqs). The running batch never evicts the
// cache. Usage reports the cached tokens
// as each API does: prompt_tokens_details.cached_tokens (chat,
// completions), input_tokens_details.cached_tokens (Responses; 0 with
// the cache off), and for Messages cache_read_input_tokens with
// input_tokens the uncached rest (absent with the cache off). With the
// cache on, a stored response also keeps its input for its follow-ups'
// layout (a conversation's turns share their predecessors).
//
// # Other routes
//
// Every route below answers in vLLM's shape (JSON field order included;
// the Anthropic events follow Anthropic's own field order) and uses the same words-as-tokens count, X-Request-Id, timing model,
// running slots and faults as chat, unless noted. Named SSE events are
// framed "event: <type>\ndata: <json>\n\n"; everything before the first
// token (response.created ... content_part.added, message_start ...
// ping) is sent at TTFT together with the first token.
//
//   - POST /v1/responses: input (a string or a list of items whose
//     content counts like a chat message), instructions,
//     max_output_tokens (default Config.DefaultMaxTokens), stream,
//     store (default true), previous_response_id, metadata (echoed).
//     input_tokens = words of input + words of instructions + for a
//     follow-up the previous response's input_tokens without its
//     instructions plus its output_tokens; input_tokens_details
//     .cached_tokens is the prefix cache's (0 when off). output_tokens is
//     max_output_tokens; status is "completed"; the id is
//     "resp_<X-Request-Id>" and the message item's "msg_<X-Request-Id>".
//     A streamed response sends response.created, response.in_progress,
//     response.output_item.added, response.content_part.added, one
//     response.output_text.delta per token, response.output_text.done,
//     response.content_part.done, response.output_item.done and
//     response.completed (terminal, with usage); each data object starts
//     with "type" and "sequence_number" (0, 1, ...). No [DONE].
//   - GET /v1/responses/{id} returns a response stored by this instance
//     (store=true; the newest Config.MaxStoredResponses are kept), else
//     404 "Response with id '<id>' not found." (type
//     invalid_request_error). previous_response_id must name one too,
//     with the same 404. A synchronous response is stored when finished.
//     background=true (with store; not streamed) answers at once with
//     the response "queued" and generates it in a goroutine on the same
//     slots and timing: GET shows "queued", "in_progress", then
//     "completed" with usage. POST /v1/responses/{id}/cancel cancels a
//     queued or in-progress one (200, status "cancelled", counted as an
//     abort), answers 400 "Cannot cancel a synchronous response." for a
//     finished one and 404 for an unknown id. [Server.Close] cancels the
//     background responses and waits for them.
//   - POST /v1/embeddings: input as a string, strings, token ids or lists
//     of token ids; encoding_format float (default) or base64
//     (little-endian float32); dimensions 1..Config.EmbeddingDim (default
//     16). One unit vector per input, a pure function of its words (token
//     id n reads as the word "tok<n>"). usage.prompt_tokens = total_tokens
//     = words (or ids) over all inputs. It takes a slot and answers after
//     TTFT; it is never streamed.
//   - POST /v1/messages (Anthropic): model and max_tokens required,
//     system (a string or text blocks), messages, stream. input_tokens =
//     words of system + messages (minus cache_read_input_tokens with
//     the prefix cache on); output_tokens = max_tokens; stop_reason
//     "max_tokens"; id "msg_<X-Request-Id>". A stream sends message_start
//     (usage input_tokens, output_tokens 0), content_block_start, ping,
//     one content_block_delta (text_delta) per token, content_block_stop,
//     message_delta (stop_reason, usage input_tokens and output_tokens)
//     and message_stop (terminal). Errors, injected ones included, are
//     {"type":"error","error":{"type":...,"message":...}} with Anthropic's
//     types (400 invalid_request_error, 404 not_found_error, 429
//     rate_limit_error, 529 overloaded_error, other 5xx api_error).
//     POST /v1/messages/count_tokens answers {"input_tokens":n} at once.
//   - POST /rerank, /v1/rerank, /v2/rerank: query, documents, top_n (0:
//     all). A (query, document) pair scores the share of the query's
//     distinct words found in the document; results are sorted by score,
//     ties by index, each {"index","document":{"text","multi_modal":null},
//     "relevance_score"}; usage {"prompt_tokens","total_tokens"} = the sum
//     over documents of query words + document words.
//   - POST /score, /v1/score: text_1 and text_2 (a string or a list; one
//     text_1 pairs with every text_2, equal lists pair up); data
//     [{"index","object":"score","score"}] with the same score and usage
//     counted like rerank, in the embeddings' usage shape. Rerank and
//     score take a slot and answer after TTFT.
//   - POST /tokenize: prompt, or messages (counted like chat, so count
//     equals a chat request's prompt_tokens); return_token_strs. Word
//     "tok<n>" is token n, any other word 2^30 + (FNV-1a(word) mod 2^30).
//     {"count","max_model_len","tokens","token_strs"}. POST /detokenize:
//     tokens -> {"prompt"} with token n read as "tok<n>", joined by
//     spaces. Both take no slot and no time and add no prefill tokens.
//   - POST /v1/audio/transcriptions and /v1/audio/translations:
//     multipart/form-data with file (its duration is its size / 32000
//     bytes, 16 kHz 16-bit mono), model, prompt, language,
//     response_format json (default: {"text","usage":{"type":"duration",
//     "seconds":ceil(duration)}}), text (text/plain) or verbose_json
//     ({"duration","language","text","segments":null,"words":null}),
//     max_completion_tokens (default Config.DefaultMaxTokens), stream and
//     stream_include_usage ("true"). A stream sends one
//     transcription.chunk (translation.chunk) per token, the last with
//     finish_reason "length", then a usage chunk {"prompt_tokens": words
//     of prompt, "completion_tokens", "total_tokens"} when
//     stream_include_usage is true, then data: [DONE].
//   - Any other path: 404 {"detail":"Not Found"}; a known path with
//     another method: 405 {"detail":"Method Not Allowed"}.
//
// Faults apply to every route in its own terms: no-done leaves out the
// route's terminal event (data: [DONE], response.completed,
// message_stop); stall-after=N, garbage-sse and truncated-json count the
// route's events; status=N answers in the route's error shape.
//
// All time is read from package time, so tests may run the simulator
// inside a testing/synctest bubble.
package vllmsim
