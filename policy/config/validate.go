package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/pacegate/pacegate/policy"
)

// FieldError is one validation problem, naming the offending field by its
// path in the file, e.g. "tenants[2].models.llama-3-8b.rate".
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// MaxNameLen is the longest tenant, org or model name accepted, in bytes.
const MaxNameLen = policy.MaxNameLen

// problems collects FieldErrors in the order the checks run, which
// follows the file.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Validate reports every problem in f, in file order, joined with
// [errors.Join]; each is a *[FieldError]. It expects defaults to have been
// filled ([File.SetDefaults]) and does not modify f.
func (f *File) Validate() error {
	var p problems
	checkAddr(&p, "listen", f.Listen)
	checkAddr(&p, "admin.listen", f.Admin.Listen)
	positive(&p, "admin.auth_burst", f.Admin.AuthBurst)
	positive(&p, "admin.auth_refill", f.Admin.AuthRefill)
	positive(&p, "admin.auth_max_sources", f.Admin.AuthMaxSources)
	f.Server.validate(&p)
	f.validateUpstreams(&p)
	checkNames(&p, "models", f.Models)
	f.Queue.validate(&p)
	f.Cluster.validate(&p, &f.Queue.RocketMQ)
	f.Control.validate(&p)
	f.Defaults.validate(&p, "defaults")
	orgs := validateOrgs(&p, f.Orgs)
	f.validateTenants(&p, orgs)
	f.Fairness.validate(&p)
	f.Routing.validate(&p)
	f.validateMaxWait(&p)
	return errors.Join(p...)
}

func checkAddr(p *problems, path, addr string) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.add(path, "must be host:port, got %q", addr)
	}
}

func (s *Server) validate(p *problems) {
	positive(p, "server.max_body_bytes", s.MaxBodyBytes)
	positive(p, "server.read_header_timeout", s.ReadHeaderTimeout)
	positive(p, "server.read_body_timeout", s.ReadBodyTimeout)
	positive(p, "server.stored_responses", s.StoredResponses)
	positive(p, "server.stored_response_ttl", s.StoredResponseTTL)
	positive(p, "server.max_header_bytes", s.MaxHeaderBytes)
	positive(p, "server.request_timeout", s.RequestTimeout)
	positive(p, "server.heartbeat", s.Heartbeat)
	nonNegative(p, "server.shutdown_delay", s.ShutdownDelay)
	positive(p, "server.shutdown_grace", s.ShutdownGrace)
	nonNegative(p, "server.write_stall_timeout", s.WriteStallTimeout)
	positive(p, "server.max_connections", s.MaxConnections)
	positive(p, "server.idle_timeout", s.IdleTimeout)
}

func (f *File) validateUpstreams(p *problems) {
	if len(f.Upstreams) == 0 {
		p.add("upstreams", "at least one upstream is required")
	}
	seen := map[string]int{}
	for i, u := range f.Upstreams {
		path := fmt.Sprintf("upstreams[%d]", i)
		if err := checkURL(u.URL); err != "" {
			p.add(path+".url", "%s", err)
		} else if j, dup := seen[u.URL]; dup {
			p.add(path+".url", "duplicate of upstreams[%d]", j)
		} else {
			seen[u.URL] = i
		}
		nonNegativeNum(p, path+".max_concurrency", u.MaxConcurrency)
		nonNegative(p, path+".idle_timeout", u.IdleTimeout)
		nonNegativeNum(p, path+".cache_tokens", u.CacheTokens)
		checkNames(p, path+".models", u.Models)
	}
}

// checkURL returns why raw is not a usable upstream URL, or "".
func checkURL(raw string) string {
	if raw == "" {
		return "required"
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("must be an http or https URL with a host, got %q", raw)
	}
	return ""
}

func (q *Queue) validate(p *problems) {
	switch q.Backend {
	case BackendEmbedded:
		e := q.Embedded
		positive(p, "queue.embedded.workers", e.Workers)
		positive(p, "queue.embedded.max_messages", e.MaxMessages)
		positive(p, "queue.embedded.max_bytes", e.MaxBytes)
		positive(p, "queue.embedded.idle_ttl", e.IdleTTL)
	case BackendRocketMQ:
		r := q.RocketMQ
		checkAddr(p, "queue.rocketmq.endpoint", r.Endpoint)
		checkName(p, "queue.rocketmq.topic", r.Topic)
		checkName(p, "queue.rocketmq.group", r.Group)
		positive(p, "queue.rocketmq.invisible", r.Invisible)
		nonNegativeNum(p, "queue.rocketmq.max_lite_topics", r.MaxLiteTopics)
		nonNegativeNum(p, "queue.rocketmq.idle_unsubscribe", r.IdleUnsubscribe)
		nonNegativeNum(p, "queue.rocketmq.subscribe_wait", r.SubscribeWait)
		nonNegativeNum(p, "queue.rocketmq.stall_after", r.StallAfter)
		nonNegativeNum(p, "queue.rocketmq.lite_topic_expiration", r.LiteTopicExpiration)
	default:
		p.add("queue.backend", "must be %q or %q, got %q", BackendEmbedded, BackendRocketMQ, q.Backend)
	}
}

func (c *Control) validate(p *problems) {
	positive(p, "control.interval", c.Interval)
	positive(p, "control.waiting_target", c.WaitingTarget)
	positive(p, "control.min_factor", c.MinFactor)
	if !(c.MaxFactor >= c.MinFactor) {
		p.add("control.max_factor", "must be >= min_factor (%g)", c.MinFactor)
	}
	if !(c.Decrease > 0 && c.Decrease < 1) {
		p.add("control.decrease", "must be in (0, 1)")
	}
	positive(p, "control.increase", c.Increase)
}

// validate checks the fields that are set, by policy's rules
// ([policy.Override.Check]); path is the LimitsSpec's own.
func (l *LimitsSpec) validate(p *problems, path string) {
	l.override().Check(func(field, problem string) { p.add(path+"."+field, "%s", problem) })
}

// validateOrgs returns the set of org ids.
func validateOrgs(p *problems, orgs []Org) map[string]bool {
	ids := map[string]bool{}
	for i, o := range orgs {
		path := fmt.Sprintf("orgs[%d]", i)
		if checkName(p, path+".id", o.ID) {
			if ids[o.ID] {
				p.add(path+".id", "duplicate org id %q", o.ID)
			}
			ids[o.ID] = true
		}
		caps := LimitsSpec{RPM: &o.RPM, TPM: &o.TPM}
		caps.validate(p, path)
	}
	return ids
}

func (f *File) validateTenants(p *problems, orgs map[string]bool) {
	ids := map[string]int{}
	keys := map[[32]byte]string{} // digest -> path of its first use
	for i := range f.Tenants {
		t := &f.Tenants[i]
		path := fmt.Sprintf("tenants[%d]", i)
		if checkName(p, path+".id", t.ID) {
			if j, dup := ids[t.ID]; dup {
				p.add(path+".id", "duplicate tenant id %q (also tenants[%d])", t.ID, j)
			} else {
				ids[t.ID] = i
			}
		}
		if t.Org != "" && checkName(p, path+".org", t.Org) && len(f.Orgs) > 0 && !orgs[t.Org] {
			p.add(path+".org", "unknown org %q (not in orgs)", t.Org)
		}
		validateKeys(p, path, t.Keys, keys)
		if _, ok := priorities[t.Priority]; !ok {
			p.add(path+".priority", "must be %q, %q or %q, got %q", PriorityHigh, PriorityNormal, PriorityLow, t.Priority)
		}
		finitePositive(p, path+".weight", t.Weight)
		t.Limits.validate(p, path+".limits")
		for _, m := range f.tenantModels(i) {
			mpath := path + ".models." + m
			if !validName(m) {
				mpath = fmt.Sprintf("%s.models[%q]", path, m)
				p.add(mpath, "%s", nameProblem(m))
			}
			spec := t.Models[m]
			spec.validate(p, mpath)
		}
	}
}

// priorities maps the config's priority names to policy's.
var priorities = map[string]policy.Priority{
	PriorityHigh:   policy.PriorityHigh,
	PriorityNormal: policy.PriorityNormal,
	PriorityLow:    policy.PriorityLow,
}

// validate checks the fairness section; its bands' max_wait against
// server.request_timeout is checked by validateMaxWait.
func (s *FairnessSpec) validate(p *problems) {
	if s.Mode != FairnessFair && s.Mode != FairnessPoll {
		p.add("fairness.mode", "must be fair or poll")
	}
	finitePositive(p, "fairness.completion_weight", s.CompletionWeight)
	if s.Reserve < 0 {
		p.add("fairness.reserve", "must be >= 0")
	}
	if s.Headroom < 0 {
		p.add("fairness.headroom", "must be >= 0")
	}
	for _, b := range s.Bands.named() {
		if b.spec.MaxWait < 0 {
			p.add("fairness.bands."+b.name+".max_wait", "must be >= 0")
		}
		if f := b.spec.MaxSlowdown; f != 0 && !(f >= 1) {
			p.add("fairness.bands."+b.name+".max_slowdown", "must be a number >= 1, or .inf for no bound")
		}
	}
}

// validate checks the routing section.
func (r *Routing) validate(p *problems) {
	if r.Policy != RoutingPrefix && r.Policy != RoutingLeastOutstanding {
		p.add("routing.policy", "must be prefix or least_outstanding")
	}
	if !(r.LoadBound >= 1) || math.IsInf(r.LoadBound, 0) {
		p.add("routing.load_bound", "must be a finite number >= 1")
	}
	positive(p, "routing.max_prefix_bytes", r.MaxPrefixBytes)
}

// namedBand is a BandSpec with its yaml key.
type namedBand struct {
	name string
	spec BandSpec
}

// named returns the bands with their yaml keys, high to low.
func (b *BandsSpec) named() []namedBand {
	return []namedBand{{"high", b.High}, {"normal", b.Normal}, {"low", b.Low}}
}

// validateKeys checks one tenant's keys; seen maps each key's digest to
// where it was first used, across tenants. Errors never echo a key.
func validateKeys(p *problems, tpath string, ks []string, seen map[[32]byte]string) {
	for j, k := range ks {
		path := fmt.Sprintf("%s.keys[%d]", tpath, j)
		d, err := KeyDigest(k)
		if err != nil {
			p.add(path, "%v", err)
			continue
		}
		if first, dup := seen[d]; dup {
			p.add(path, "duplicate API key (also %s)", first)
			continue
		}
		seen[d] = path
	}
}

// KeyDigest returns the SHA-256 digest an API key entry stands for: the
// hash of a plain key, or the decoded hex of a "sha256:<64 hex>" entry.
func KeyDigest(entry string) ([32]byte, error) {
	var d [32]byte
	if entry == "" {
		return d, errors.New("must not be empty")
	}
	hexPart, hashed := strings.CutPrefix(entry, "sha256:")
	if !hashed {
		return sha256.Sum256([]byte(entry)), nil
	}
	if len(hexPart) != 64 {
		return d, errors.New(`must be "sha256:" followed by 64 hex digits`)
	}
	if _, err := hex.Decode(d[:], []byte(hexPart)); err != nil {
		return d, errors.New(`must be "sha256:" followed by 64 hex digits`)
	}
	return d, nil
}

// tenantModels returns tenants[i].models keys in file order when known,
// then any others (a File built in code) sorted.
func (f *File) tenantModels(i int) []string {
	t := &f.Tenants[i]
	names := make([]string, 0, len(t.Models))
	if i < len(f.modelOrder) {
		for _, m := range f.modelOrder[i] {
			if _, ok := t.Models[m]; ok && !slices.Contains(names, m) {
				names = append(names, m)
			}
		}
	}
	var rest []string
	for m := range t.Models {
		if !slices.Contains(names, m) {
			rest = append(rest, m)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

// validateMaxWait checks that server.request_timeout exceeds the longest
// max_wait anywhere, so a request can always outlive its queueing.
func (f *File) validateMaxWait(p *problems) {
	var longest *FieldError
	var max float64
	consider := func(path string, l LimitsSpec) {
		if l.MaxWait != nil && float64(*l.MaxWait) > max {
			max = float64(*l.MaxWait)
			longest = &FieldError{Path: path + ".max_wait", Msg: l.MaxWait.String()}
		}
	}
	consider("defaults", f.Defaults)
	for _, b := range f.Fairness.Bands.named() {
		if b.spec.MaxWait > 0 {
			consider("fairness.bands."+b.name, LimitsSpec{MaxWait: &b.spec.MaxWait})
		}
	}
	for i := range f.Tenants {
		path := fmt.Sprintf("tenants[%d]", i)
		consider(path+".limits", f.Tenants[i].Limits)
		for _, m := range f.tenantModels(i) {
			consider(path+".models."+m, f.Tenants[i].Models[m])
		}
	}
	if longest != nil && f.Server.RequestTimeout > 0 && float64(f.Server.RequestTimeout) <= max {
		p.add("server.request_timeout", "must exceed every max_wait (%s is %s)", longest.Path, longest.Msg)
	}
}

func checkNames(p *problems, path string, names []string) {
	seen := map[string]bool{}
	for i, n := range names {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		if checkName(p, ipath, n) {
			if seen[n] {
				p.add(ipath, "duplicate %q", n)
			}
			seen[n] = true
		}
	}
}

// checkName reports a bad name and returns whether it was fine.
func checkName(p *problems, path, name string) bool {
	if msg := nameProblem(name); msg != "" {
		p.add(path, "%s", msg)
		return false
	}
	return true
}

func validName(name string) bool { return nameProblem(name) == "" }

// nameProblem returns why name is unusable as an id or model name, or ""
// ([policy.CheckModelName] holds the rule).
func nameProblem(name string) string {
	if err := policy.CheckModelName(name); err != nil {
		return err.Error()
	}
	return ""
}

func positive[T int | ~int64 | float64](p *problems, path string, v T) {
	if !(v > 0) {
		p.add(path, "must be > 0")
	}
}

// finitePositive reports v unless it is a finite number > 0.
func finitePositive(p *problems, path string, v float64) {
	switch {
	case !(v > 0): // also NaN
		p.add(path, "must be > 0")
	case math.IsInf(v, 1):
		p.add(path, "must be finite")
	}
}

func nonNegativeNum[T int | ~int64](p *problems, path string, v T) {
	if v < 0 {
		p.add(path, "must be >= 0")
	}
}

func nonNegative[T int | ~int64](p *problems, path string, v *T) {
	if v != nil && *v < 0 {
		p.add(path, "must be >= 0")
	}
}

// CheckName returns why name is unusable as a tenant, org or model name,
// or nil: it is [policy.CheckModelName].
func CheckName(name string) error { return policy.CheckModelName(name) }
