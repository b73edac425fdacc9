package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	apisv1alpha1 "github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/drift"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// driftReported waits until mg's newest recent drift is want (its time
// aside), read by recent, and a DriftRepaired event on mg says so.
func driftReported(t *testing.T, mg resource.Managed, recent func() []apisv1alpha1.Drift, want apisv1alpha1.Drift) {
	t.Helper()
	msg := drift.Message(want)
	testenv.Eventually(t, wait, "drift reported: "+msg, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(mg), mg); err != nil {
			return false, err
		}
		r := recent()
		if len(r) == 0 || !sameDrift(r[0], want) {
			return false, fmt.Errorf("newest recent drift: %+v", r)
		}
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(mg.GetNamespace())); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == mg.GetName() && e.Reason == string(drift.ReasonRepaired) && e.Message == msg {
				return true, nil
			}
		}
		return false, fmt.Errorf("no %s event %q", drift.ReasonRepaired, msg)
	})
}

func sameDrift(a, b apisv1alpha1.Drift) bool {
	return a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name && slices.Equal(a.Fields, b.Fields) && a.MoreFields == b.MoreFields
}
