// Package e2e holds the end-to-end tests on a real node (build tag e2e;
// run them with `make test-node`, as root): a control plane, kubelet,
// kube-proxy, kube-scheduler and containerd (package node) run pods
// whose images come from an in-process registry.
package e2e
