package source

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list
// rbac: the event recorder writes events.k8s.io Events
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,resourceNames=a;b,verbs=get
// +kubebuilder:rbac:urls=/metrics,verbs=get
