package config

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseInvalid(t *testing.T) {
	for _, c := range []struct {
		file string
		want string
	}{
		{"unknown_field.yaml", "config: yaml: unmarshal errors:\n  line 3: field limit not found in type config.TenantSpec"},
		{"dup_mapping_key.yaml", "config: yaml: unmarshal errors:\n  line 3: mapping key \"listen\" already defined at line 2"},
		{"duration_int.yaml", "config: yaml: unmarshal errors:\n  line 2: cannot unmarshal !!int `30` into time.Duration"},
		{"empty.yaml", "config: empty file"},
		{"dup_tenant.yaml", `tenants[1].id: duplicate tenant id "a" (also tenants[0])`},
		{"dup_key.yaml", "tenants[1].keys[0]: duplicate API key (also tenants[0].keys[0])"},
		{"bad_sha.yaml", `tenants[0].keys[0]: must be "sha256:" followed by 64 hex digits` + "\n" +
			`tenants[0].keys[1]: must be "sha256:" followed by 64 hex digits` + "\n" +
			"tenants[0].keys[2]: must not be empty"},
		{"unknown_org.yaml", `tenants[0].org: unknown org "acme" (not in orgs)`},
		{"bad_limits.yaml", strings.Join([]string{
			"defaults.rpm: must be >= 0",
			"defaults.tpm: must be >= 0",
			"defaults.burst: must be >= 0",
			"defaults.backlog: must be >= 0",
			"tenants[0].limits.rate: must be > 0",
			"tenants[0].limits.max_wait: must be > 0",
			"tenants[2].models.zeta.rate: must be > 0", // file order, not name order
			"tenants[2].models.llama-3-8b.rate: must be > 0",
		}, "\n")},
		{"request_timeout.yaml", "server.request_timeout: must exceed every max_wait (tenants[0].models.m.max_wait is 1m30s)"},
		{"shutdown_delay.yaml", "server.shutdown_delay: must be >= 0"},
		{"fault_limits.yaml", strings.Join([]string{
			"server.write_stall_timeout: must be >= 0",
			"server.max_connections: must be > 0",
			"server.idle_timeout: must be > 0",
			"upstreams[0].idle_timeout: must be >= 0",
		}, "\n")},
		{"backend.yaml", `queue.backend: must be "embedded" or "rocketmq", got "kafka"`},
		{"upstream_url.yaml", `upstreams[0].url: must be an http or https URL with a host, got "ftp://host/x"` + "\n" +
			`upstreams[1].url: must be an http or https URL with a host, got "127.0.0.1:8000"` + "\n" +
			"upstreams[2].url: required\n" +
			"upstreams[2].max_concurrency: must be >= 0"},
		{"no_upstreams.yaml", "upstreams: at least one upstream is required"},
		{"priority.yaml", `tenants[0].priority: must be "high", "normal" or "low", got "urgent"`},
		{"fairness.yaml", strings.Join([]string{
			"tenants[0].weight: must be > 0",
			"tenants[1].weight: must be finite",
			"tenants[2].weight: must be > 0",
			"fairness.mode: must be fair or poll",
			"fairness.completion_weight: must be > 0",
			"fairness.bands.high.max_wait: must be >= 0",
			"fairness.bands.high.max_slowdown: must be a number >= 1, or .inf for no bound",
			"fairness.bands.normal.max_slowdown: must be a number >= 1, or .inf for no bound",
			"fairness.bands.low.max_wait: must be >= 0",
			"fairness.bands.low.max_slowdown: must be a number >= 1, or .inf for no bound",
		}, "\n")},
		{"completion_weight.yaml", "fairness.completion_weight: must be finite"},
		{"band_max_wait.yaml", "server.request_timeout: must exceed every max_wait (fairness.bands.low.max_wait is 2m0s)"},
		{"names.yaml", `tenants[0].id: contains a control character: "a\ab"` + "\n" +
			"tenants[1].id: longer than 128 bytes\n" +
			`tenants[1].models["bad\tmodel"]: contains a control character: "bad\tmodel"`},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := Parse(mustRead(t, "invalid/"+c.file))
			if err == nil {
				t.Fatalf("parsed: %+v", f)
			}
			if err.Error() != c.want {
				t.Fatalf("error:\n%s\nwant:\n%s", err, c.want)
			}
		})
	}
}

func TestParseMinimal(t *testing.T) {
	f, err := Parse(mustRead(t, "valid/minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Listen != "127.0.0.1:8080" || f.Admin.Listen != "127.0.0.1:9090" || f.Admin.Token != "" {
		t.Errorf("listen/admin: %q %+v", f.Listen, f.Admin)
	}
	if a := f.Admin; a.AuthBurst != 5 || a.AuthRefill != 10*time.Second || a.AuthMaxSources != 10000 {
		t.Errorf("admin auth defaults: %+v", a)
	}
	s := f.Server
	if s.ShutdownDelay == nil || *s.ShutdownDelay != 5*time.Second {
		t.Errorf("server.shutdown_delay default: %v", s.ShutdownDelay)
	}
	if s.WriteStallTimeout == nil || *s.WriteStallTimeout != 30*time.Second {
		t.Errorf("server.write_stall_timeout default: %v", s.WriteStallTimeout)
	}
	s.ShutdownDelay, s.WriteStallTimeout = nil, nil
	want := Server{MaxBodyBytes: 8 << 20, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		RequestTimeout: 120 * time.Second, Heartbeat: 5 * time.Second, ShutdownGrace: 30 * time.Second,
		MaxConnections: 10000, IdleTimeout: 120 * time.Second, ReadBodyTimeout: 30 * time.Second,
		StoredResponses: 65536, StoredResponseTTL: time.Hour}
	if s != want {
		t.Errorf("server defaults: %+v", s)
	}
	if len(f.Upstreams) != 1 || f.Upstreams[0].MaxConcurrency != 0 || *f.Upstreams[0].IdleTimeout != 30*time.Second {
		t.Errorf("upstreams: %+v", f.Upstreams)
	}
	q := f.Queue
	if q.Backend != BackendEmbedded || q.Embedded != (Embedded{64, 100000, 256 << 20, 10 * time.Minute}) ||
		q.RocketMQ != (RocketMQ{Endpoint: "127.0.0.1:8081", Topic: "LLM_REQ", Group: "GID_PACEGATE", Invisible: 10 * time.Second}) {
		t.Errorf("queue defaults: %+v", q)
	}
	if f.Control != (Control{false, 2 * time.Second, 8, 0.1, 1, 0.5, 0.05}) {
		t.Errorf("control defaults: %+v", f.Control)
	}
	d := f.Defaults
	if *d.RPM != 600 || *d.TPM != 200000 || *d.Burst != 20 || *d.Rate != 5 || *d.Backlog != 1000 || *d.MaxWait != 30*time.Second {
		t.Errorf("defaults: %+v", d)
	}
	if f.Fairness != (FairnessSpec{Mode: FairnessFair, CompletionWeight: 2, Bands: BandsSpec{High: BandSpec{MaxSlowdown: 1.25}}}) {
		t.Errorf("fairness defaults: %+v", f.Fairness)
	}
	tn := f.Tenants[0]
	if tn.ID != "acme" || tn.Org != "acme-corp" || tn.Priority != PriorityNormal || tn.Weight != 1 ||
		*tn.Limits.Rate != 10 || tn.Limits.RPM != nil {
		t.Errorf("tenant: %+v", tn)
	}
	if m := tn.Models["llama-3-8b"]; *m.RPM != 1200 || *m.Rate != 20 || m.TPM != nil {
		t.Errorf("model override: %+v", m)
	}
}

func TestParseValid(t *testing.T) {
	f, err := Parse(mustRead(t, "valid/full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(*f.Defaults.Rate, 1) || *f.Defaults.Backlog != DefaultBacklog || *f.Defaults.RPM != 0 {
		t.Errorf("defaults: rate %v backlog %v rpm %v", *f.Defaults.Rate, *f.Defaults.Backlog, *f.Defaults.RPM)
	}
	if d := f.Server.ShutdownDelay; d == nil || *d != 0 {
		t.Errorf("an explicit shutdown_delay: 0s became %v", d)
	}
	if d := f.Server.WriteStallTimeout; d == nil || *d != 0 {
		t.Errorf("an explicit write_stall_timeout: 0s became %v", d)
	}
	if d := f.Upstreams[0].IdleTimeout; d == nil || *d != 0 {
		t.Errorf("an explicit idle_timeout: 0s became %v", d)
	}
	if s := f.Server; s.MaxConnections != 500 || s.IdleTimeout != time.Minute {
		t.Errorf("server: %+v", s)
	}
	if f.Queue.Backend != BackendRocketMQ || f.Queue.RocketMQ.Replicas != 3 || f.Tenants[0].Priority != PriorityHigh {
		t.Errorf("queue/priority: %+v %q", f.Queue, f.Tenants[0].Priority)
	}
	if tn := f.Tenants[1]; tn.Priority != PriorityLow || tn.Weight != 0.5 {
		t.Errorf("tenant solo: priority %q weight %v", tn.Priority, tn.Weight)
	}
	fair := FairnessSpec{Mode: FairnessPoll, CompletionWeight: 3,
		Bands: BandsSpec{High: BandSpec{MaxWait: time.Second, MaxSlowdown: DefaultHighMaxSlowdown},
			Normal: BandSpec{MaxSlowdown: 1.5}, Low: BandSpec{MaxWait: 2 * time.Minute}}}
	if f.Fairness != fair {
		t.Errorf("fairness: %+v, want %+v", f.Fairness, fair)
	}
	if _, err := Parse(mustRead(t, "valid/org_without_list.yaml")); err != nil {
		t.Errorf("an org only tenants mention, with no orgs list: %v", err)
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	_, err := Load("testdata/invalid/priority.yaml")
	want := `testdata/invalid/priority.yaml: tenants[0].priority: must be "high", "normal" or "low", got "urgent"`
	if err == nil || err.Error() != want {
		t.Fatalf("Load error %v, want %s", err, want)
	}
	if _, err := Load("testdata/valid/minimal.yaml"); err != nil {
		t.Fatal(err)
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestApplyEnv(t *testing.T) {
	f, err := Parse(mustRead(t, "valid/full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	err = f.ApplyEnv(env(map[string]string{
		EnvListen:            "127.0.0.1:18080",
		EnvAdminListen:       "127.0.0.1:19090",
		EnvAdminToken:        "",
		EnvQueueBackend:      "embedded",
		EnvRocketMQEndpoint:  "mq2:8081",
		EnvRocketMQTopic:     "T2",
		EnvRocketMQGroup:     "G2",
		EnvRocketMQReplicaID: "r7",
		EnvUpstreams:         " https://vllm.internal:443 , http://new:8000,",
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := f.Queue.RocketMQ
	if f.Listen != "127.0.0.1:18080" || f.Admin.Listen != "127.0.0.1:19090" || f.Admin.Token != "" ||
		f.Queue.Backend != "embedded" || r.Endpoint != "mq2:8081" || r.Topic != "T2" || r.Group != "G2" || r.ReplicaID != "r7" {
		t.Errorf("env not applied: %+v", f)
	}
	want := []Upstream{{URL: "https://vllm.internal:443"}, {URL: "http://new:8000"}}
	if len(f.Upstreams) != 2 || f.Upstreams[0].URL != want[0].URL || f.Upstreams[1].URL != want[1].URL ||
		f.Upstreams[1].MaxConcurrency != 0 {
		t.Errorf("upstreams: %+v", f.Upstreams)
	}
	if err := f.ApplyEnv(env(map[string]string{EnvQueueBackend: "kafka"})); err == nil ||
		err.Error() != `queue.backend: must be "embedded" or "rocketmq", got "kafka"` {
		t.Errorf("bad env backend: %v", err)
	}
}

func TestLoadEnvSuppliesUpstreams(t *testing.T) {
	lookup := env(map[string]string{EnvUpstreams: "http://127.0.0.1:8000"})
	f, err := LoadEnv("testdata/invalid/no_upstreams.yaml", lookup)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Upstreams) != 1 || f.Upstreams[0].MaxConcurrency != 0 {
		t.Fatalf("upstreams: %+v", f.Upstreams)
	}
}

func TestValidateFileBuiltInCode(t *testing.T) {
	zero, one := 0.0, 1.0
	f := &File{
		Upstreams: []Upstream{{URL: "http://x:1"}},
		Tenants: []TenantSpec{{ID: "a", Keys: []string{"k"}, Models: map[string]LimitsSpec{
			"b": {Rate: &zero}, "a": {Rate: &zero}, "c": {Rate: &one},
		}}},
	}
	f.SetDefaults()
	want := "tenants[0].models.a.rate: must be > 0\ntenants[0].models.b.rate: must be > 0"
	if err := f.Validate(); err == nil || err.Error() != want {
		t.Fatalf("Validate = %v, want (sorted without a file order)\n%s", err, want)
	}
}

func TestKeyDigest(t *testing.T) {
	plain, err := KeyDigest("password")
	if err != nil {
		t.Fatal(err)
	}
	hashed, err := KeyDigest("sha256:5E884898DA28047151D0E56F8DC6292773603D0D6AABBDD62A11EF721D1542D8")
	if err != nil || hashed != plain {
		t.Fatalf("upper-case hex digest: %v, equal=%v", err, hashed == plain)
	}
}
