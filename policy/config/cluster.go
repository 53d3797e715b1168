package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Cluster says how many gateway replicas share the tenants' quotas and
// where they share them. Without a Store each replica enforces every cap
// on its own and paces each bucket at rate/Replicas; with one, caps and
// rates are exact across the replicas (policy/cluster).
type Cluster struct {
	// ReplicaID names this process among the replicas: unique and stable
	// (a StatefulSet ordinal, a host name). It is part of the RocketMQ
	// LiteTopic names. Default "r0".
	ReplicaID string `yaml:"replica_id"`
	// Replicas is how many replicas share the tenants; default 1. Without
	// a store, or while it is unreachable, each replica keeps cap/Replicas
	// and rate/Replicas.
	Replicas int `yaml:"replicas"`
	// Store is the shared store, redis://host:port/db (rediss:// for
	// TLS); "" = none.
	Store string `yaml:"store"`
}

// setDefaults migrates the deprecated queue.rocketmq keys (cluster's own
// keys win), then fills the defaults.
func (c *Cluster) setDefaults(r *RocketMQ) {
	setString(&c.ReplicaID, r.ReplicaID)
	setNum(&c.Replicas, r.Replicas)
	setString(&c.ReplicaID, "r0")
	setNum(&c.Replicas, 1)
}

func (c *Cluster) validate(p *problems, r *RocketMQ) {
	checkName(p, "cluster.replica_id", c.ReplicaID)
	positive(p, "cluster.replicas", c.Replicas)
	if r.Replicas < 0 {
		p.add("queue.rocketmq.replicas", "must be > 0")
	}
	if c.Store != "" {
		if _, err := ParseStoreURL(c.Store); err != nil {
			p.add("cluster.store", "%v", err)
		}
	}
}

// Deprecations lists the deprecated keys the file (or environment) set,
// each with what replaces it, for the process to log at start.
func (f *File) Deprecations() []string {
	var out []string
	r := f.Queue.RocketMQ
	if r.ReplicaID != "" {
		out = append(out, deprecated("queue.rocketmq.replica_id", "cluster.replica_id", r.ReplicaID, f.Cluster.ReplicaID))
	}
	if r.Replicas != 0 {
		out = append(out, deprecated("queue.rocketmq.replicas", "cluster.replicas", r.Replicas, f.Cluster.Replicas))
	}
	return out
}

func deprecated[T comparable](old, repl string, oldV, used T) string {
	msg := fmt.Sprintf("%s is deprecated: set %s", old, repl)
	if oldV != used {
		msg += fmt.Sprintf(" (%v is ignored: %s is %v)", oldV, repl, used)
	}
	return msg
}

// StoreURL is a parsed cluster.store.
type StoreURL struct {
	TLS  bool   // rediss://
	Addr string // host:port
	DB   int    // the database number, 0 by default
	// Username and Password come from the URL's user info, if any.
	Username, Password string
}

// ParseStoreURL reads redis://[user:password@]host:port[/db] (or
// rediss://) and says precisely what is wrong with anything else: the
// gateway refuses to start on a store it cannot read rather than guess.
func ParseStoreURL(raw string) (StoreURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return StoreURL{}, errors.New("must be redis://host:port/db") // not echoed: it may hold a password
	}
	shown := u.Redacted()
	var s StoreURL
	switch u.Scheme {
	case "redis":
	case "rediss":
		s.TLS = true
	default:
		return StoreURL{}, fmt.Errorf("scheme must be redis or rediss, got %q", shown)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return StoreURL{}, fmt.Errorf("must name host:port, got %q", shown)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return StoreURL{}, fmt.Errorf("port must be 1-65535, got %q", shown)
	}
	s.Addr = u.Host
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 || n > 15 {
			return StoreURL{}, fmt.Errorf("database must be a number 0-15, got %q", shown)
		}
		s.DB = n
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return StoreURL{}, fmt.Errorf("takes no query or fragment, got %q", shown)
	}
	if u.User != nil {
		s.Username = u.User.Username()
		s.Password, _ = u.User.Password()
	}
	return s, nil
}
