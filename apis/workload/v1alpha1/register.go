package v1alpha1

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Package type metadata.
const (
	Group   = "workload.clusterops.io"
	Version = "v1alpha1"
)

var (
	// SchemeGroupVersion is group version used to register these objects.
	SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion}
)

// ImmortalContainer type metadata.
var (
	ImmortalContainerKind             = reflect.TypeOf(ImmortalContainer{}).Name()
	ImmortalContainerGroupKind        = schema.GroupKind{Group: Group, Kind: ImmortalContainerKind}.String()
	ImmortalContainerGroupVersionKind = SchemeGroupVersion.WithKind(ImmortalContainerKind)
)

// AppBundle type metadata.
var (
	AppBundleKind             = reflect.TypeOf(AppBundle{}).Name()
	AppBundleGroupKind        = schema.GroupKind{Group: Group, Kind: AppBundleKind}.String()
	AppBundleGroupVersionKind = SchemeGroupVersion.WithKind(AppBundleKind)
)

// ConfigRollout type metadata.
var (
	ConfigRolloutKind             = reflect.TypeOf(ConfigRollout{}).Name()
	ConfigRolloutGroupKind        = schema.GroupKind{Group: Group, Kind: ConfigRolloutKind}.String()
	ConfigRolloutGroupVersionKind = SchemeGroupVersion.WithKind(ConfigRolloutKind)
)

func init() {
	SchemeBuilder.Register(&ConfigRollout{}, &ConfigRolloutList{})
	SchemeBuilder.Register(&ImmortalContainer{}, &ImmortalContainerList{})
	SchemeBuilder.Register(&AppBundle{}, &AppBundleList{})
}
