package v1alpha1

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Package type metadata.
const (
	Group   = "chaos.clusterops.io"
	Version = "v1alpha1"
)

var (
	// SchemeGroupVersion is group version used to register these objects.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}
)

// ChaosAgent type metadata.
var (
	ChaosAgentKind             = reflect.TypeOf(ChaosAgent{}).Name()
	ChaosAgentGroupKind        = schema.GroupKind{Group: Group, Kind: ChaosAgentKind}.String()
	ChaosAgentGroupVersionKind = SchemeGroupVersion.WithKind(ChaosAgentKind)
)

func init() {
	SchemeBuilder.Register(&ChaosAgent{}, &ChaosAgentList{})
}
