package main

import (
	"io"
	"log"
	"log/slog"
)

// discardLog silences the baselines' proxies: a client that leaves on
// purpose would otherwise log.
var discardLog = log.New(io.Discard, "", 0)

// quietLogger is handed to pacegate: the harness measures it, it does
// not read its logs.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))
