// Package deploy holds pacegate's deploy kit, which is not Go: the
// docker compose stack (compose.yaml), the Grafana dashboard
// (grafana/dashboards), the Prometheus alert rules and their unit tests
// (prometheus/), and the Helm chart (helm/pacegate). See the README's
// "Deploying" section.
//
// The package's tests keep the kit honest against the code: every metric
// a dashboard query or an alert rule names must appear in a live scrape
// of a gateway started in the test, and the configs the kit ships must
// load. scripts/deploy-check.sh runs the checks that need outside tools
// (promtool, helm, compose-go, the Kubernetes schemas).
package deploy
