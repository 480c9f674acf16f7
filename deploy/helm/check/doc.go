// Package check renders the Helm chart deploy/helm/cctrace with each of its value sets and
// checks every rendered object against the Kubernetes API schemas, offline: each object is
// decoded strictly (unknown and duplicate fields refused) into the Go type the API server would
// decode it into, from k8s.io/api, the Prometheus Operator's monitoring API, the Gateway API and
// Envoy Gateway's API; then the chart's promises are checked on the typed objects.
//
// The helm binary comes from CCTRACE_HELM_BIN (scripts/tools.sh builds it from tools/helm), the
// collector that validates the rendered collector configs from CCTRACE_OTELCOL_BIN. Outside CI
// a missing one skips the tests that need it; under CI=true it fails them.
package check
