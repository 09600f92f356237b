// Package deploy holds what runs ballet-gateway in production, and the tests
// that check it: the container image (Dockerfile, Dockerfile.dockerignore),
// Kubernetes manifests (kubernetes/), Prometheus scrape configuration and
// alert rules with their unit tests (prometheus/), a Grafana dashboard
// (grafana/) and systemd units (systemd/). README.md says how to use each.
//
// The package has no code. Its tests check the files against the product:
// every metric a query names exists in the gateway's registry, every
// environment variable is a BALLET_* variable of docs/configuration.md, every
// alert has a runbook in docs/runbooks.md and a row in README.md, and the
// probes, ports and shutdown timing agree with the gateway's; the samples
// turn on no real model provider. External checkers run when installed:
// promtool (Debian's prometheus package), python3 with PyYAML, kubectl
// (kustomize) and systemd-analyze. Without one, its tests skip, except with
// CI=true, where they fail.
package deploy
