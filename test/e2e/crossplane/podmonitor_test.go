//go:build e2e

package crossplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// podMonitor is what examples/monitoring/podmonitor.yaml says of the pods it
// scrapes: the namespace it lives in, its selector and the named port of
// each endpoint.
type podMonitor struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port string `json:"port"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// checkPodMonitorSelects asserts that the PodMonitor examples/monitoring ships
// selects the provider's pods as core's Deployment runtime runs them, and that
// each of its endpoints names a port their container has: a PodMonitor that
// selects nothing scrapes nothing, and says so nowhere.
func checkPodMonitorSelects(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(s.root, "examples", "monitoring", "podmonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pm := &podMonitor{}
	if err := yaml.Unmarshal(raw, pm); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the PodMonitor to select the provider's pods", func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := s.c.List(ctx, pods, client.InNamespace(crossplaneNamespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			for _, e := range pm.Spec.Endpoints {
				if !hasPort(p, e.Port) {
					return false, fmt.Sprintf("pod %s has no port %q", p.Name, e.Port), nil
				}
			}
		}
		return len(pods.Items) > 0, fmt.Sprintf("%d pods in %s match %s", len(pods.Items), crossplaneNamespace, sel), nil
	})
}

// hasPort reports whether a container of p has a port of that name.
func hasPort(p corev1.Pod, name string) bool {
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == name {
				return true
			}
		}
	}
	return false
}
