package rocketmq

import (
	"os"
	"testing"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// The Go client logs warnings and errors only, unless the environment
// names its level (at info it writes a line per Suspend).
func TestTheClientLogsWarningsUnlessTold(t *testing.T) {
	if v, set := os.LookupEnv(rmq.CLIENT_LOG_LEVEL); set && v != clientLogLevel {
		t.Skipf("%s=%s is set by the environment", rmq.CLIENT_LOG_LEVEL, v)
	}
	quietClient()
	if got := os.Getenv(rmq.CLIENT_LOG_LEVEL); got != "warn" {
		t.Fatalf("%s = %q after quietClient, want warn", rmq.CLIENT_LOG_LEVEL, got)
	}
}
