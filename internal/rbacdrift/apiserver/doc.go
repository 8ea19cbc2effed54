// Package apiserver holds the proof of package rbacdrift against the real
// thing: its tests start kube-apiserver (test/testenv), bind roles to a ServiceAccount, impersonate it, and
// require the API server to accept exactly the component RBAC objects that
// rbacdrift.Coverage says the ServiceAccount may create.
package apiserver
