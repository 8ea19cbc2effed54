package v1alpha2

// LabelOperatorMajor assigns an InferenceStack to one major version of the
// operator, when several run side by side: the operator of major N reconciles
// exactly the stacks labelled "N", and its cache holds no other. The one major
// that takes unlabelled stacks (its --take-unlabeled-stacks flag, set per
// release) reconciles them too, without labelling them; their status
// (resolvedDistribution.operatorVersion) names the release that does.
// Setting or changing the label hands a stack over to another major, which
// takes its objects over in place.
const LabelOperatorMajor = "inferencestack.io/operator-major"
