// Package deploy holds deployment files (Kubernetes manifests, systemd
// units, example configuration, Prometheus rules) and the test that keeps
// them consistent with the binary.
package deploy
