package source

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list
// rbac: the event recorder writes events.k8s.io Events
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,resourceNames=a;b,verbs=get
// +kubebuilder:rbac:urls=/metrics,verbs=get

// Reconciler's doc comment holds a marker: controller-gen takes it as a
// marker of the type, not of the package, and makes no rule of it.
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get
type Reconciler struct{}
