package function

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/crossplane/function-sdk-go/resource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// Resource names of a WebApp's composed resources in the pipeline.
const (
	ResourceApp     resource.Name = "app"
	ResourceConfig  resource.Name = "config"
	ResourceRollout resource.Name = "rollout"
)

// WebAppSpec is the spec of a WebApp (XWebApp through a claim).
type WebAppSpec struct {
	// ProviderConfigName is the ClusterProviderConfig of the composed
	// managed resources.
	ProviderConfigName string `json:"providerConfigName,omitempty"`

	// Image the app runs.
	Image string `json:"image,omitempty"`

	// Replicas of the app; unset leaves the count to others.
	Replicas *int32 `json:"replicas,omitempty"`

	// Port the app listens on, and the Service's.
	Port *int32 `json:"port,omitempty"`

	// Service exposes the port: None, ClusterIP or NodePort.
	Service string `json:"service,omitempty"`

	// Config is the app's configuration: each key becomes an environment
	// variable of the app, read from a ConfigMap; a change rolls the app.
	Config map[string]string `json:"config,omitempty"`
}

// envName is what a config key must look like: an environment variable name
// every container runtime and shell accepts (and a valid ConfigMap key).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// composeWebApp composes an AppBundle that runs the image, and, when the app
// has config, a ConfigMap holding it (read by the app through environment
// variables) and a ConfigRollout that rolls the app's Deployment, named like
// the AppBundle, whenever the ConfigMap changes.
func composeWebApp(xr *xrInput, observed map[resource.Name]resource.ObservedComposed) (*composition, error) {
	spec := &WebAppSpec{}
	if err := xr.decodeSpec(spec); err != nil {
		return nil, err
	}
	if err := spec.validate(xr.baseName); err != nil {
		return nil, err
	}

	pc := providerConfigRef(spec.ProviderConfigName)
	c := &composition{resources: map[resource.Name]*resource.DesiredComposed{}}
	appName, configName := xr.baseName, xr.baseName+"-config"

	app := &workloadv1alpha1.AppBundle{
		ObjectMeta: metav1.ObjectMeta{Name: appName, Namespace: xr.namespace},
		Spec: workloadv1alpha1.AppBundleSpec{
			ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: pc},
			ForProvider: workloadv1alpha1.AppBundleParameters{
				Image:    spec.Image,
				Replicas: spec.Replicas,
				Port:     spec.Port,
				Service:  workloadv1alpha1.ServiceType(spec.Service),
			},
		},
	}
	// Sorted, so the same config always gives the same pod template.
	for _, k := range sortedKeys(spec.Config) {
		app.Spec.ForProvider.Env = append(app.Spec.ForProvider.Env, corev1.EnvVar{
			Name: k,
			ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: configName},
				Key:                  k,
			}},
		})
	}
	if err := c.add(ResourceApp, app, workloadv1alpha1.AppBundleGroupVersionKind, mrReady(observed, ResourceApp)); err != nil {
		return nil, err
	}

	if len(spec.Config) > 0 {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: configName, Namespace: xr.namespace},
			Data:       spec.Config,
		}
		if err := c.add(ResourceConfig, cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"), existsReady(observed, ResourceConfig)); err != nil {
			return nil, err
		}
		// Environment variables are read when a pod starts: without a
		// rollout, a changed config would wait for the next restart.
		ro := &workloadv1alpha1.ConfigRollout{
			ObjectMeta: metav1.ObjectMeta{Name: configName, Namespace: xr.namespace},
			Spec: workloadv1alpha1.ConfigRolloutSpec{
				ManagedResourceSpec: xpv2.ManagedResourceSpec{ProviderConfigReference: pc},
				ForProvider: workloadv1alpha1.ConfigRolloutParameters{
					ConfigMaps: []workloadv1alpha1.SourceRef{{Name: configName}},
					// An AppBundle's Deployment is named like the AppBundle.
					Workloads: []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: appName}},
				},
			},
		}
		if err := c.add(ResourceRollout, ro, workloadv1alpha1.ConfigRolloutGroupVersionKind, mrReady(observed, ResourceRollout)); err != nil {
			return nil, err
		}
	}

	if o, ok := observed[ResourceApp]; ok {
		st := map[string]any{}
		n, _ := o.Resource.GetInteger("status.atProvider.readyReplicas")
		st["readyReplicas"] = n
		if a, _ := o.Resource.GetString("status.atProvider.serviceAddress"); a != "" {
			st["serviceAddress"] = a
		}
		c.status = st
	}
	return c, nil
}

// validate checks what the XRD's schema checks too, so that an XR applied
// without it gets a clear answer rather than an MR the API server refuses.
func (s *WebAppSpec) validate(appName string) error {
	if s.ProviderConfigName != "" {
		if err := objectName("spec.providerConfigName", s.ProviderConfigName); err != nil {
			return err
		}
	}
	if s.Image == "" {
		return required("spec.image")
	}
	if strings.ContainsAny(s.Image, " \t\n") {
		return invalid("spec.image", "%q must not contain spaces", s.Image)
	}
	if s.Replicas != nil && *s.Replicas < 0 {
		return invalid("spec.replicas", "must not be negative, got %d", *s.Replicas)
	}
	if err := between("spec.port", s.Port, 1, 65535); err != nil {
		return err
	}
	switch workloadv1alpha1.ServiceType(s.Service) {
	case "", workloadv1alpha1.ServiceNone:
	case workloadv1alpha1.ServiceClusterIP, workloadv1alpha1.ServiceNodePort:
		if s.Port == nil {
			return invalid("spec.port", "is required to expose the app through a %s Service", s.Service)
		}
		if errs := validation.IsDNS1035Label(appName); len(errs) > 0 {
			return invalid("spec.service", "cannot expose %q: a Service name %s", appName, strings.Join(errs, "; "))
		}
	default:
		return invalid("spec.service", "must be None, ClusterIP or NodePort, got %q", s.Service)
	}
	for _, k := range sortedKeys(s.Config) {
		if !envName.MatchString(k) {
			return invalid(fmt.Sprintf("spec.config[%q]", k), "is not usable as an environment variable name: use letters, digits and _, not starting with a digit")
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
