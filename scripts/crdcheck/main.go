// Command crdcheck validates the prometheus-operator objects among
// rendered manifests, which the Kubernetes JSON schemas do not describe:
// each ServiceMonitor is decoded strictly (an unknown or mistyped field
// is an error) into the operator's own Go type, from which its CRD schema
// is generated. Other kinds are skipped; it fails if no ServiceMonitor
// was found, so that a check that silently checks nothing cannot pass.
//
// Usage (from the module directory, see scripts/deploy-check.sh):
//
//	go run . manifests.yaml...
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdcheck manifests.yaml...")
		os.Exit(2)
	}
	n := 0
	var problems []error
	for _, path := range os.Args[1:] {
		k, err := checkFile(path)
		n += k
		if err != nil {
			problems = append(problems, err)
		}
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintln(os.Stderr, "crdcheck:", err)
		os.Exit(1)
	}
	if n == 0 {
		fmt.Fprintln(os.Stderr, "crdcheck: no ServiceMonitor found")
		os.Exit(1)
	}
	fmt.Printf("crdcheck: %d ServiceMonitor(s) valid\n", n)
}

// checkFile checks every ServiceMonitor document in path and returns how
// many there were.
func checkFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return n, nil
		} else if err != nil {
			return n, fmt.Errorf("%s: %w", path, err)
		}
		if doc["kind"] != monitoringv1.ServiceMonitorsKind {
			continue
		}
		n++
		if err := checkServiceMonitor(doc); err != nil {
			return n, fmt.Errorf("%s: ServiceMonitor: %w", path, err)
		}
	}
}

func checkServiceMonitor(doc map[string]any) error {
	if doc["apiVersion"] != monitoringv1.SchemeGroupVersion.String() {
		return fmt.Errorf("apiVersion %v, want %s", doc["apiVersion"], monitoringv1.SchemeGroupVersion)
	}
	b, err := sigsyaml.Marshal(doc)
	if err != nil {
		return err
	}
	var sm monitoringv1.ServiceMonitor
	if err := sigsyaml.UnmarshalStrict(b, &sm); err != nil {
		return err
	}
	if len(sm.Spec.Endpoints) == 0 {
		return errors.New("no endpoints")
	}
	for i, e := range sm.Spec.Endpoints {
		if e.Port == "" {
			return fmt.Errorf("endpoints[%d]: no port name", i)
		}
	}
	return nil
}
