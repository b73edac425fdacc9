// Package v1alpha1 contains the chaos.clusterops.io/v1alpha1 API group:
// managed resources that break things on purpose, within limits they enforce.
// +kubebuilder:object:generate=true
// +groupName=chaos.clusterops.io
// +versionName=v1alpha1
package v1alpha1
