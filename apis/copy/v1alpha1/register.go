package v1alpha1

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Package type metadata.
const (
	Group   = "copy.clusterops.io"
	Version = "v1alpha1"
)

var (
	// SchemeGroupVersion is group version used to register these objects.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}
)

// CopyRule type metadata.
var (
	CopyRuleKind             = reflect.TypeOf(CopyRule{}).Name()
	CopyRuleGroupKind        = schema.GroupKind{Group: Group, Kind: CopyRuleKind}.String()
	CopyRuleGroupVersionKind = SchemeGroupVersion.WithKind(CopyRuleKind)
)

func init() {
	SchemeBuilder.Register(&CopyRule{}, &CopyRuleList{})
}
