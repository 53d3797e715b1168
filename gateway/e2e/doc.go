// Package e2e holds pacegate's end-to-end tests: the whole process built by
// gateway/app, in front of the simulated vLLM upstream, driven through real
// sockets by the official OpenAI Go client and by raw HTTP.
package e2e
