// Package v1alpha1 contains the workload.clusterops.io/v1alpha1 API group:
// managed resources that run and repair workloads.
// +kubebuilder:object:generate=true
// +groupName=workload.clusterops.io
// +versionName=v1alpha1
package v1alpha1
