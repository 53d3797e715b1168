// Command pacegate is an OpenAI-compatible LLM gateway that paces each
// tenant+model through its own queue instead of answering 429.
package main

func main() {}
