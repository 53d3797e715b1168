package config

import (
	"slices"
	"testing"
)

func minimal(extra string) []byte {
	return []byte("upstreams: [{url: http://127.0.0.1:8000}]\n" + extra)
}

func TestClusterDefaultsAndMigration(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		want       Cluster
		warnings   []string
	}{
		{"defaults", "", nil, Cluster{ReplicaID: "r0", Replicas: 1}, nil},
		{"cluster keys", "cluster: {replica_id: r2, replicas: 3, store: redis://127.0.0.1:6379/0}\n", nil,
			Cluster{ReplicaID: "r2", Replicas: 3, Store: "redis://127.0.0.1:6379/0"}, nil},
		{"old keys migrate", "queue: {rocketmq: {replica_id: r1, replicas: 2}}\n", nil,
			Cluster{ReplicaID: "r1", Replicas: 2}, []string{
				"queue.rocketmq.replica_id is deprecated: set cluster.replica_id",
				"queue.rocketmq.replicas is deprecated: set cluster.replicas"}},
		{"cluster keys win", "cluster: {replica_id: r5}\nqueue: {rocketmq: {replica_id: r1}}\n", nil,
			Cluster{ReplicaID: "r5", Replicas: 1}, []string{
				"queue.rocketmq.replica_id is deprecated: set cluster.replica_id (r1 is ignored: cluster.replica_id is r5)"}},
		{"env", "", map[string]string{EnvClusterReplicaID: "r9", EnvClusterStore: "redis://10.0.0.1:6380/2"},
			Cluster{ReplicaID: "r9", Replicas: 1, Store: "redis://10.0.0.1:6380/2"}, nil},
		{"old env migrates", "", map[string]string{EnvRocketMQReplicaID: "r4"},
			Cluster{ReplicaID: "r4", Replicas: 1}, []string{"queue.rocketmq.replica_id is deprecated: set cluster.replica_id"}},
		{"new env beats old env", "", map[string]string{EnvRocketMQReplicaID: "r4", EnvClusterReplicaID: "r6"},
			Cluster{ReplicaID: "r6", Replicas: 1}, []string{
				"queue.rocketmq.replica_id is deprecated: set cluster.replica_id (r4 is ignored: cluster.replica_id is r6)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(minimal(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if tc.env != nil {
				if err := f.ApplyEnv(env(tc.env)); err != nil {
					t.Fatal(err)
				}
			}
			if f.Cluster != tc.want {
				t.Errorf("cluster %+v, want %+v", f.Cluster, tc.want)
			}
			if got := f.Deprecations(); !slices.Equal(got, tc.warnings) {
				t.Errorf("deprecations %q, want %q", got, tc.warnings)
			}
		})
	}
}

func TestClusterValidation(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"cluster: {replicas: -1}", "cluster.replicas: must be > 0"},
		{`cluster: {replica_id: "a\x01b"}`, "cluster.replica_id: contains a control character"},
		{"cluster: {store: 'http://127.0.0.1:6379'}", `cluster.store: scheme must be redis or rediss, got "http://127.0.0.1:6379"`},
		{"cluster: {store: 'redis://127.0.0.1'}", `cluster.store: must name host:port, got "redis://127.0.0.1"`},
		{"cluster: {store: 'redis://127.0.0.1:0/0'}", `cluster.store: port must be 1-65535, got "redis://127.0.0.1:0/0"`},
		{"cluster: {store: 'redis://127.0.0.1:6379/x'}", `cluster.store: database must be a number 0-15, got "redis://127.0.0.1:6379/x"`},
		{"cluster: {store: 'redis://u:secret@127.0.0.1:6379/99'}", `cluster.store: database must be a number 0-15, got "redis://u:xxxxx@127.0.0.1:6379/99"`},
		{"cluster: {store: 'redis://127.0.0.1:6379/0?pool=2'}", `cluster.store: takes no query or fragment, got "redis://127.0.0.1:6379/0?pool=2"`},
		{"cluster: {store: '%zz'}", "cluster.store: must be redis://host:port/db"},
	} {
		_, err := Parse(minimal(tc.yaml + "\n"))
		if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
			t.Errorf("%s: error %v, want %s", tc.yaml, err, tc.want)
		}
	}
}

func TestParseStoreURL(t *testing.T) {
	got, err := ParseStoreURL("rediss://user:pw@redis.internal:6380/3")
	want := StoreURL{TLS: true, Addr: "redis.internal:6380", DB: 3, Username: "user", Password: "pw"}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	if got, err := ParseStoreURL("redis://[::1]:6379"); err != nil || got != (StoreURL{Addr: "[::1]:6379"}) {
		t.Fatalf("ipv6: %+v, %v", got, err)
	}
}

func FuzzParseStoreURL(f *testing.F) {
	for _, s := range []string{"redis://127.0.0.1:6379/0", "rediss://u:p@h:1/15", "redis://h", "%zz", "redis://:6379"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := ParseStoreURL(raw)
		if err != nil {
			return
		}
		if s.Addr == "" || s.DB < 0 || s.DB > 15 {
			t.Fatalf("%q parsed to %+v", raw, s)
		}
	})
}
