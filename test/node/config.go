package node

import (
	"fmt"
	"strings"
)

// containerdSocket is containerd's socket inside the node's namespaces.
const containerdSocket = "/run/containerd/containerd.sock"

// MirroredRegistries are the registries whose images the node's containerd
// pulls from the in-process registry instead, keeping the repository path
// (quay.io/inferencestack/x and registry.test/inferencestack/x are the same
// image there). registry.test (a reserved name) is for test-only images.
// "_default" covers every other registry on containerd 1.7 and later;
// containerd 1.6 has no default and tries the internet, which the node's
// network namespace cannot reach.
var MirroredRegistries = []string{"quay.io", "docker.io", "registry.k8s.io", "ghcr.io", "gcr.io", "registry.test", "_default"}

// hostsTOML is containerd's registry host configuration sending pulls to
// the in-process registry at host, over plain HTTP.
func hostsTOML(host string) string {
	return fmt.Sprintf(`# Written by test/node: every pull goes to the test's in-process registry.
server = "http://%[1]s"

[host."http://%[1]s"]
  capabilities = ["pull", "resolve"]
`, host)
}

// containerdConfig is containerd's configuration: its state under the
// node's private /var/lib and /run; CRI with the locally built pause image,
// restrict_oom_score_adj (the test machines refuse lowering oom_score_adj),
// no AppArmor (profiles would be loaded into the machine's kernel), cgroupfs
// (as the kubelet), the CNI network and the registry mirrors of hostsDir.
func containerdConfig(cniBinDir, cniConfDir, hostsDir string) string {
	return fmt.Sprintf(`# Written by test/node.
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = %[1]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[2]q
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[3]q
    conf_dir = %[4]q

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[5]q
`, containerdSocket, PauseImage, cniBinDir, cniConfDir, hostsDir)
}

// cniConflist is the pod network: a bridge (the pods' gateway, masquerading
// what leaves PodCIDR) with host-local addresses, and port mappings.
func cniConflist() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "inferencestack-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, PodCIDR)
}

// kubeletConfiguration is the kubelet's configuration: cgroupfs below
// cgroupRoot (cgroup v1 is allowed: the test machines use it), containerd,
// the cluster DNS stand-in on NodeIP (clusterDNS), eviction and image garbage collection only when the disk
// is all but full (the test machines are small and shared), webhook
// authentication and authorization of its API.
func kubeletConfiguration() string {
	return strings.TrimLeft(fmt.Sprintf(`
# Written by test/node.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%[2]s
cgroupDriver: cgroupfs
cgroupRoot: /%[3]s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
resolvConf: ""
clusterDNS:
  - %[1]s
clusterDomain: %[4]s
serializeImagePulls: false
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
rotateCertificates: false
serverTLSBootstrap: false
`, NodeIP, containerdSocket, cgroupRoot, ClusterDomain), "\n")
}

// kubeProxyConfiguration is kube-proxy's configuration: iptables mode,
// masquerading all Service traffic (pods reaching a Service backed by a pod
// on the same bridge get their answers back without br_netfilter), and
// conntrack limits left as they are (they are machine-wide).
func kubeProxyConfiguration(kubeconfig string) string {
	return strings.TrimLeft(fmt.Sprintf(`
# Written by test/node.
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]q
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables:
  masqueradeAll: true
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, Name, PodCIDR), "\n")
}
