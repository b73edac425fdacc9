// Package v1alpha1 contains the copy.clusterops.io/v1alpha1 API group:
// managed resources that copy ConfigMaps and Secrets across namespaces.
// +kubebuilder:object:generate=true
// +groupName=copy.clusterops.io
// +versionName=v1alpha1
package v1alpha1
