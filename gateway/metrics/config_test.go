package metrics

import (
	"github.com/pacegate/pacegate/policy"
	"github.com/pacegate/pacegate/policy/config"
)

type configFile struct{}

func (configFile) quotas() (*policy.Quotas, error) {
	f, err := config.Parse([]byte("upstreams: [{url: \"http://127.0.0.1:1\"}]\ntenants: [{id: a, keys: [k]}]\n"))
	if err != nil {
		return nil, err
	}
	return f.Quotas()
}
