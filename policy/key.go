package policy

// Key names one bucket: a tenant's traffic to one model. Keys are
// comparable values, so looking one up in a map does not allocate.
type Key struct {
	Tenant string
	Model  string
}

// String renders the key as "tenant/model" for logs.
func (k Key) String() string { return k.Tenant + "/" + k.Model }
