package configrollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/watchset"
)

func TestSourceWatches(t *testing.T) {
	rollout := func(cms, secrets []string) *v1alpha1.ConfigRollout {
		cr := &v1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "nginx"}}
		for _, n := range cms {
			cr.Spec.ForProvider.ConfigMaps = append(cr.Spec.ForProvider.ConfigMaps, v1alpha1.SourceRef{Name: n, Keys: []string{"k"}})
		}
		for _, n := range secrets {
			cr.Spec.ForProvider.Secrets = append(cr.Spec.ForProvider.Secrets, v1alpha1.SourceRef{Name: n})
		}
		return cr
	}
	watch := func(resource, name string) watchset.Watch {
		return watchset.Watch{Resource: corev1.SchemeGroupVersion.WithResource(resource), Namespace: "web", Fields: "metadata.name=" + name}
	}
	cases := map[string]struct {
		reason string
		cr     *v1alpha1.ConfigRollout
		want   []watchset.Watch
	}{
		"OnePerSource": {
			reason: "Each source is watched alone, by name, in the rollout's namespace; nothing else is.",
			cr:     rollout([]string{"nginx-conf", "extra"}, []string{"tls"}),
			want:   []watchset.Watch{watch("configmaps", "nginx-conf"), watch("configmaps", "extra"), watch("secrets", "tls")},
		},
		"NoSources": {
			reason: "A rollout without sources (rejected at admission anyway) watches nothing.",
			cr:     rollout(nil, nil),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, sourceWatches(tc.cr)); diff != "" {
				t.Errorf("%s\nsourceWatches(...): -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
