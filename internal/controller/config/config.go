// Package config runs the controllers of ProviderConfig and
// ClusterProviderConfig: they count the managed resources that use a config and
// block its deletion while any do.
package config

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/providerconfig"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/managedkind"
)

// Setup adds the controllers of both config kinds.
func Setup(mgr ctrl.Manager, o controller.Options) error {
	for _, k := range []struct {
		kind   string
		object resource.ProviderConfig
	}{
		{kind: v1alpha1.ProviderConfigKind, object: &v1alpha1.ProviderConfig{}},
		{kind: v1alpha1.ClusterProviderConfigKind, object: &v1alpha1.ClusterProviderConfig{}},
	} {
		name := providerconfig.ControllerName(k.kind)
		of := resource.ProviderConfigKinds{
			Config:    v1alpha1.SchemeGroupVersion.WithKind(k.kind),
			Usage:     v1alpha1.ProviderConfigUsageGroupVersionKind,
			UsageList: v1alpha1.ProviderConfigUsageListGroupVersionKind,
		}
		r := providerconfig.NewReconciler(managedkind.SkipNoOpWrites(mgr), of,
			providerconfig.WithLogger(o.Logger.WithValues("controller", name)),
			providerconfig.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(name)))) //nolint:staticcheck // crossplane-runtime's recorder takes the record API.
		err := ctrl.NewControllerManagedBy(mgr).
			Named(name).
			WithOptions(o.ForControllerRuntime()).
			For(k.object).
			Watches(&v1alpha1.ProviderConfigUsage{}, &resource.EnqueueRequestForProviderConfig{Kind: k.kind}).
			Complete(ratelimiter.NewReconciler(name, errors.WithSilentRequeueOnConflict(r), o.GlobalRateLimiter))
		if err != nil {
			return errors.Wrapf(err, "cannot set up %s controller", k.kind)
		}
	}
	return nil
}
