package configrollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

func TestSlimRollout(t *testing.T) {
	deleted := metav1.NewTime(testNow)
	full := rollout()
	full.SetCreationTimestamp(metav1.NewTime(testNow))
	full.SetDeletionTimestamp(&deleted)
	full.SetUID("uid")
	full.SetResourceVersion("7")
	full.SetLabels(map[string]string{"clusterops.io/shard": "1"})
	full.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"})
	full.Status.AtProvider.Hash = "h"
	full.Status.AtProvider.Workloads = []v1alpha1.RolledWorkload{
		{Kind: KindDeployment, Name: "followed", Hash: "h", Baseline: true},
		{Kind: KindDeployment, Name: "rolled", Hash: "h", LastRollout: &deleted, RecentRollouts: []metav1.Time{deleted}},
		{Kind: KindDeployment, Name: "toroll"},
	}
	full.Status.AtProvider.Wave = &v1alpha1.RolloutWave{Hash: "h", Workloads: []v1alpha1.WaveWorkload{{Kind: KindDeployment, Name: "toroll"}}}
	slim := rollout()
	slim.Spec = v1alpha1.ConfigRolloutSpec{}
	slim.SetCreationTimestamp(metav1.NewTime(testNow))
	slim.SetDeletionTimestamp(&deleted)
	slim.SetUID("uid")
	slim.SetResourceVersion("7")
	slim.Status.AtProvider.Workloads = []v1alpha1.RolledWorkload{{Kind: KindDeployment, Name: "followed", Baseline: true}, {Kind: KindDeployment, Name: "rolled", Hash: "h"}}

	cases := map[string]struct {
		reason string
		in     any
		want   any
	}{
		"ConfigRollout": {
			reason: "A rollout keeps what others read of it: identity, creation, deletion, and the workloads it holds by a baseline or a roll, without times.",
			in:     full,
			want:   slim,
		},
		"OtherObject": {
			reason: "Anything else passes as it is.",
			in:     &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"}},
			want:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SlimRollout(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nSlimRollout(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	// The index reads the same of the slim rollout as of the full one.
	got, _ := SlimRollout(full)
	if diff := cmp.Diff(followingValues(full), followingValues(got.(*v1alpha1.ConfigRollout))); diff != "" {
		t.Errorf("followingValues of the slim rollout: -full, +slim:\n%s", diff)
	}
}
