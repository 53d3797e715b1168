package config

import "strings"

// Environment variables read by [File.ApplyEnv]. Each one, when set,
// replaces the file's value.
const (
	EnvListen            = "PACEGATE_LISTEN"
	EnvAdminListen       = "PACEGATE_ADMIN_LISTEN"
	EnvAdminToken        = "PACEGATE_ADMIN_TOKEN"
	EnvQueueBackend      = "PACEGATE_QUEUE_BACKEND"
	EnvRocketMQEndpoint  = "PACEGATE_ROCKETMQ_ENDPOINT"
	EnvRocketMQTopic     = "PACEGATE_ROCKETMQ_TOPIC"
	EnvRocketMQGroup     = "PACEGATE_ROCKETMQ_GROUP"
	EnvRocketMQReplicaID = "PACEGATE_ROCKETMQ_REPLICA_ID" // deprecated: PACEGATE_CLUSTER_REPLICA_ID
	EnvClusterReplicaID  = "PACEGATE_CLUSTER_REPLICA_ID"
	EnvClusterStore      = "PACEGATE_CLUSTER_STORE"
	EnvUpstreams         = "PACEGATE_UPSTREAMS" // comma-separated URLs
)

// ApplyEnv overrides fields from the environment, read through lookup
// (e.g. [os.LookupEnv]), then re-validates the whole file. A variable set
// to the empty string counts as set: PACEGATE_ADMIN_TOKEN="" switches the
// admin API off.
//
// PACEGATE_UPSTREAMS replaces the upstream list; an upstream whose URL was
// already in the file keeps its max_concurrency and models, a new one gets
// the defaults.
func (f *File) ApplyEnv(lookup func(string) (string, bool)) error {
	f.applyEnv(lookup)
	return f.Validate()
}

func (f *File) applyEnv(lookup func(string) (string, bool)) {
	set := func(name string, dst *string) {
		if v, ok := lookup(name); ok {
			*dst = v
		}
	}
	set(EnvListen, &f.Listen)
	set(EnvAdminListen, &f.Admin.Listen)
	set(EnvAdminToken, &f.Admin.Token)
	set(EnvQueueBackend, &f.Queue.Backend)
	set(EnvRocketMQEndpoint, &f.Queue.RocketMQ.Endpoint)
	set(EnvRocketMQTopic, &f.Queue.RocketMQ.Topic)
	set(EnvRocketMQGroup, &f.Queue.RocketMQ.Group)
	if v, ok := lookup(EnvRocketMQReplicaID); ok { // deprecated: migrates, and loses to the new name
		f.Queue.RocketMQ.ReplicaID, f.Cluster.ReplicaID = v, v
	}
	set(EnvClusterReplicaID, &f.Cluster.ReplicaID)
	set(EnvClusterStore, &f.Cluster.Store)
	if v, ok := lookup(EnvUpstreams); ok {
		f.Upstreams = mergeUpstreams(f.Upstreams, v)
	}
}

// mergeUpstreams builds the upstream list from a comma-separated URL list,
// keeping the settings of URLs the file already had.
func mergeUpstreams(old []Upstream, list string) []Upstream {
	var out []Upstream
	for _, raw := range strings.Split(list, ",") {
		u := strings.TrimSpace(raw)
		if u == "" {
			continue
		}
		up := Upstream{URL: u}
		for _, o := range old {
			if o.URL == u {
				up = o
				break
			}
		}
		out = append(out, up)
	}
	return out
}
