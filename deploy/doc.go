// Package deploy holds the observability stack's files (docker-compose.yml, collector, Jaeger,
// Tempo, Prometheus, Alertmanager and Grafana configuration; see README.md) and a test that keeps
// their metric names in step with what cctrace exposes. It has no Go API.
package deploy
