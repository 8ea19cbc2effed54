// Package node runs a real one-node Kubernetes cluster for end-to-end tests,
// with no container engine and nothing pulled from the internet.
//
// What runs for real: etcd, kube-apiserver and kube-controller-manager (the
// control plane of test/testenv), kube-scheduler, kubelet, kube-proxy
// (iptables mode) and kube-router's network policy controller (alone: it
// enforces NetworkPolicy with iptables and ipset), all built from source by
// hack/controlplane.sh and hack/node.sh; containerd, runc and the CNI
// plugins (bridge, host-local, portmap, loopback) from the distribution.
// Bridged pod traffic passes iptables (br_netfilter, turned on in the
// node's network namespace). Pods are scheduled, their images pulled by
// containerd, their containers started by runc, probed by the kubelet,
// reached through Services and filtered by NetworkPolicies.
//
// What stands in: every image comes from an in-process registry
// (test/registry): containerd's registry configuration
// sends quay.io, docker.io, registry.k8s.io, ghcr.io, gcr.io and
// registry.test to it, keeping the repository path, so images keep their
// published names. The pod sandbox ("pause") image is a static Go program
// built by the harness (package pause). Cluster DNS is a stand-in in the
// test binary (clusterDNS): it answers Services' names with their
// ClusterIPs and nothing else. There is no storage provisioner.
//
// Isolation: kubelet, kube-proxy and containerd run in their own PID, mount
// and network namespaces (unshare), joined to this machine by a veth pair
// (HostIP, NodeIP). The API server listens on HostIP. Inside, /run is a
// private tmpfs, /var/lib and /var/log are bound to a state folder, and the
// kernel settings kubelet would change machine-wide (vm.overcommit_memory,
// kernel.panic, ...) are bound to files, so the machine keeps its own. When
// the test binary dies by any means, the kernel kills the namespaces' first
// process, hence every process of the node and its containers, and tears
// down their network links, iptables rules and mounts with them. Pod cgroups
// live under one root (cgroupRoot); they and the state folder are removed by
// Stop, or by the next New after a killed run. One node runs per machine at
// a time (a lock file).
//
// The node needs root and Linux; hack/node.sh installs what it needs.
package node
