// Package jsonscan checks JSON in one pass without allocating, and hands
// its caller the top-level object's members, or the top-level array's
// elements, as the raw bytes they are in the input.
//
// It is what the gateway's request path and the relay's response path
// need of JSON: is this one valid value, which members does it have, and
// the bytes of the few that matter (a request's model and messages, a
// chunk's usage). encoding/json answers the same questions by checking
// the input, then decoding it and copying every value, at about a fifth
// of the speed; its decoder is still what reads the few values pacegate
// keeps (a model name with escapes, a usage object).
//
// What Valid, Object and Array accept is exactly what encoding/json.Valid
// accepts (RFC 8259, nesting up to 10,000 levels, UTF-8 not checked); the
// package's fuzz targets hold them to it, and String to json.Unmarshal.
package jsonscan
