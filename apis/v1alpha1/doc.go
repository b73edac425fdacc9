// Package v1alpha1 contains the clusterops.io/v1alpha1 API group: the
// ProviderConfig and ClusterProviderConfig that tell managed resources which
// cluster to act on and how far outside their own namespace they may reach.
// +kubebuilder:object:generate=true
// +groupName=clusterops.io
// +versionName=v1alpha1
package v1alpha1
