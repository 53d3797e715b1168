// Package prefix is the data structure behind KV-cache-aware routing:
// which replica of the pool probably holds a prompt's prefix in its KV
// cache, without a tokenizer and without asking the replicas.
//
// A prompt is rendered by the gateway in a fixed order (system, tools,
// messages) and cut into blocks of [BlockBytes] bytes (about 64 tokens of
// English at four bytes per token). Each full block gets a hash chained
// to the one before it, seeded with the model, so block i's hash stands
// for the whole prompt up to the end of block i: two prompts share their
// first n hashes exactly when they share their first n blocks. The
// trailing partial block is not hashed (a next turn extends it, so it
// would never match), and only the first max bytes are hashed, so a
// multi-megabyte prompt costs bounded work and memory.
//
// [Index] remembers, per replica, the blocks recently routed there, in
// a least-recently-used list of the size of that replica's cache: the
// replica's own cache evicts the least recently used blocks first, so
// entries leave the index as they would leave the cache. A [Index.Match]
// walks a chain once and reports, for every replica, how many leading
// blocks it holds. The index is sized per replica, as configured or as
// the replica reports its cache ([Index.Size]), and [Index.Feedback]
// corrects it from the cached token counts the replica reports.
//
// The package starts no goroutines and reads no clock. An Index is safe
// for concurrent use; a [Builder] is not.
package prefix
