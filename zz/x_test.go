package x

import (
	rmq "github.com/apache/rocketmq-clients/golang/v5"
	_ "github.com/chromedp/chromedp"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/google/uuid"
	_ "github.com/lmittmann/tint"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "go.yaml.in/yaml/v3"
	_ "golang.org/x/time/rate"
	"testing"
)

func TestX(t *testing.T) { _ = rmq.NewConsumerResultSuspend }
