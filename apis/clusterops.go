// Package apis contains the API groups of provider-clusterops.
package apis

import (
	"k8s.io/apimachinery/pkg/runtime"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// AddToSchemes may be used to add all resources defined in the project to a Scheme.
var AddToSchemes = runtime.SchemeBuilder{
	v1alpha1.SchemeBuilder.AddToScheme,
	workloadv1alpha1.SchemeBuilder.AddToScheme,
	copyv1alpha1.SchemeBuilder.AddToScheme,
	chaosv1alpha1.SchemeBuilder.AddToScheme,
}

// AddToScheme adds all resources to the Scheme.
func AddToScheme(s *runtime.Scheme) error {
	return AddToSchemes.AddToScheme(s)
}
