package rocketmq

import (
	"os"
	"sync"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// clientLogLevel is the Go client's own log level unless the environment
// variable rocketmq.client.logLevel says otherwise. The client logs one
// INFO line (through zap, with its caller, to a file it writes
// synchronously) for every Suspend it applies, and a waiting bucket is
// suspended every 50 ms: thousands of lines a second, a share of the
// gateway's CPU on the broker, for nothing an operator reads. Its
// warnings and errors are kept.
const clientLogLevel = "warn"

var quietClientLog sync.Once

// quietClient sets the Go client's log level to clientLogLevel, once,
// before the first client is made (clients copy the logger when made).
func quietClient() {
	quietClientLog.Do(func() {
		if _, set := os.LookupEnv(rmq.CLIENT_LOG_LEVEL); set {
			return
		}
		if os.Setenv(rmq.CLIENT_LOG_LEVEL, clientLogLevel) == nil {
			rmq.ResetLogger()
		}
	})
}
