package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ohAdmin is the admin API of the overhead scenario's pacegate process,
// turned on at a free address with a token of its own: the harness reads
// the process's queue-wait histogram there and, with -pprof, its
// profiles, as an operator would.
type ohAdmin struct {
	url   string // http://host:port
	token string
}

// newOhAdmin returns the admin API to be, and the environment that turns
// it on in the process.
func newOhAdmin() (*ohAdmin, []string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	a := &ohAdmin{url: "http://" + addr, token: rand.Text()}
	return a, []string{"PACEGATE_ADMIN_LISTEN=" + addr, "PACEGATE_ADMIN_TOKEN=" + a.token}, nil
}

// get GETs path (with its leading '/') and hands its body to read; a
// status other than 200 is an error quoting the body's start.
func (a *ohAdmin) get(ctx context.Context, path string, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s %s", path, resp.Status, b)
	}
	return read(resp.Body)
}

// queueWait is the process's pacegate_queue_wait_seconds now, every
// model's together.
func (a *ohAdmin) queueWait(ctx context.Context) (waitHist, error) {
	var h waitHist
	err := a.get(ctx, "/metrics", func(r io.Reader) (err error) {
		h, err = parseQueueWait(r)
		return err
	})
	return h, err
}

// waitHist is a cumulative histogram: cum[i] observations at most le[i]
// seconds, le ascending and ending at +Inf (so cum's last is the count).
type waitHist struct {
	le  []float64
	cum []uint64
}

// parseQueueWait reads pacegate_queue_wait_seconds from a Prometheus text
// exposition, summing its models' series bucket by bucket.
func parseQueueWait(r io.Reader) (waitHist, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return waitHist{}, err
	}
	byLE := map[float64]uint64{}
	for _, m := range fams["pacegate_queue_wait_seconds"].GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) { // the text's +Inf line, the count's
				byLE[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
		byLE[math.Inf(1)] += m.GetHistogram().GetSampleCount()
	}
	var h waitHist
	for le := range byLE {
		h.le = append(h.le, le)
	}
	slices.Sort(h.le)
	for _, le := range h.le {
		h.cum = append(h.cum, byLE[le])
	}
	return h, nil
}

// since is h less the observations of before, an earlier reading of the
// same histogram.
func (h waitHist) since(before waitHist) waitHist {
	d := waitHist{le: h.le, cum: slices.Clone(h.cum)}
	for i, le := range h.le {
		if j := slices.Index(before.le, le); j >= 0 {
			d.cum[i] -= before.cum[j]
		}
	}
	return d
}

// add is h and o together (rounds pooled), by h's buckets; o has the
// same, being a reading of the same process.
func (h waitHist) add(o waitHist) waitHist {
	if len(h.le) == 0 {
		return waitHist{le: o.le, cum: slices.Clone(o.cum)}
	}
	s := waitHist{le: h.le, cum: slices.Clone(h.cum)}
	for i, le := range s.le {
		if j := slices.Index(o.le, le); j >= 0 {
			s.cum[i] += o.cum[j]
		}
	}
	return s
}

// count is how many observations h holds.
func (h waitHist) count() uint64 {
	if len(h.cum) == 0 {
		return 0
	}
	return h.cum[len(h.cum)-1]
}

// quantileLE is the upper bound of the bucket holding h's q-quantile: the
// quantile is at most that; NaN when h is empty.
func (h waitHist) quantileLE(q float64) float64 {
	n := h.count()
	if n == 0 {
		return math.NaN()
	}
	for i, c := range h.cum {
		if float64(c) >= q*float64(n) {
			return h.le[i]
		}
	}
	return math.Inf(1)
}

// within is the share of h's observations at most le seconds, le being
// one of its bounds; NaN when h is empty or le is not a bound.
func (h waitHist) within(le float64) float64 {
	i := slices.Index(h.le, le)
	if i < 0 || h.count() == 0 {
		return math.NaN()
	}
	return float64(h.cum[i]) / float64(h.count())
}

// usBound formats a bucket bound in seconds as µs.
func usBound(le float64) string {
	if math.IsInf(le, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(le*1e6, 'f', -1, 64) + " µs"
}
