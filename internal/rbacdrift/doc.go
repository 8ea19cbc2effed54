// Package rbacdrift checks the operator's RBAC against what it needs, the way
// the API server will:
//
//   - Coverage: the API server refuses to let anyone grant a permission they
//     do not hold (RBAC escalation prevention). Every RBAC object the
//     operator creates for its components (rendered by the component
//     builders, operator/componentrbac) must be creatable with the
//     operator's own permissions: the write itself (create and patch, what
//     server-side apply of a new object needs), and for a role either every
//     rule it grants or `escalate` on it, for a binding either `bind` on the
//     role it references or every rule of that role. Rule comparison is
//     k8s.io/component-helpers/auth/rbac/validation.Covers, the code the API
//     server runs.
//   - Freshness: the operator bundle of the current release carries exactly
//     the permissions of the current RBAC manifests.
//   - Least privilege (a report, never a failure): rules of the operator's
//     ClusterRole that nothing needs and nothing explains.
package rbacdrift
