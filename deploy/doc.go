// Package deploy holds deployment files and the tests that keep them
// consistent with the binary: the Helm chart (helm/talon), the plain
// Kubernetes manifests generated from it (kubernetes/), systemd units with
// example configuration, and Prometheus rules. The chart tests run helm
// built from its Go module and apply the rendered objects to a real
// kube-apiserver (internal/testenv); they skip under -short.
package deploy
