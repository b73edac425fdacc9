package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// TestConnectionSecretAdmission checks that the kinds without connection
// details refuse spec.writeConnectionSecretToRef with a message that says so,
// and that the kinds with some accept it.
func TestConnectionSecretAdmission(t *testing.T) {
	const ref = `writeConnectionSecretToRef: {name: conn}`
	admit(t, map[string]admission{
		"CopyRuleRefused": {
			reason: "A CopyRule has no connection details.",
			yaml:   `{apiVersion: copy.clusterops.io/v1alpha1, kind: CopyRule, metadata: {name: conn-copy}, spec: {` + ref + `, forProvider: {kind: ConfigMap, names: [a], allNamespaces: true}}}`,
			want:   "a CopyRule has no connection details: remove spec.writeConnectionSecretToRef",
		},
		"ChaosAgentRefused": {
			reason: "A ChaosAgent has no connection details.",
			yaml:   `{apiVersion: chaos.clusterops.io/v1alpha1, kind: ChaosAgent, metadata: {name: conn-chaos}, spec: {` + ref + `, forProvider: {ipsumMode: true, dryRun: true}}}`,
			want:   "a ChaosAgent has no connection details: remove spec.writeConnectionSecretToRef",
		},
		"ConfigRolloutRefused": {
			reason: "A ConfigRollout has no connection details.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: conn-rollout}, spec: {` + ref + `, forProvider: {configMaps: [{name: c}], auto: true}}}`,
			want:   "a ConfigRollout has no connection details: remove spec.writeConnectionSecretToRef",
		},
		"AppBundleAccepted": {
			reason: "An AppBundle publishes its Service's address.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: conn-bundle}, spec: {writeConnectionSecretToRef: {name: conn-bundle}, forProvider: {image: nginx, port: 80, service: ClusterIP}}}`,
		},
		"ImmortalContainerAccepted": {
			reason: "An ImmortalContainer publishes its pod's name and IP.",
			yaml:   `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: conn-immortal}, spec: {writeConnectionSecretToRef: {name: conn-immortal}, forProvider: {image: nginx}}}`,
		},
	})
}

// secretData waits until Secret ns/name holds exactly want, and fails the
// test naming only the keys it holds, never their values.
func secretData(t *testing.T, ns, name string, want map[string]string) {
	t.Helper()
	testenv.Eventually(t, wait, fmt.Sprintf("Secret %s/%s to hold keys %v", ns, name, slices.Sorted(maps.Keys(want))), func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
			return false, err
		}
		got := map[string]string{}
		for k, v := range s.Data {
			got[k] = string(v)
		}
		if !maps.Equal(got, want) {
			return false, fmt.Errorf("it holds keys %v", slices.Sorted(maps.Keys(got)))
		}
		return true, nil
	})
}

func TestAppBundlePublishesItsServiceAddress(t *testing.T) {
	ns := env.Namespace(t, "conn-bundle", nil)
	ab := bundle(ns, "web")
	ab.Spec.ForProvider.Port, ab.Spec.ForProvider.Service = ptr.To[int32](8080), workloadv1alpha1.ServiceClusterIP
	ab.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "web-conn"}
	env.Create(t, ab)

	svc := &corev1.Service{}
	testenv.Eventually(t, wait, "the Service to get a cluster IP", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, svc)
		return svc.Spec.ClusterIP != "", err
	})
	secretData(t, ns, "web-conn", map[string]string{
		workloadv1alpha1.AppBundleEndpointKey:  "web." + ns + ".svc",
		workloadv1alpha1.AppBundlePortKey:      "8080",
		workloadv1alpha1.AppBundleClusterIPKey: svc.Spec.ClusterIP,
	})

	// A new port is published; without a Service there is nothing to publish.
	env.Update(t, ab, func() { ab.Spec.ForProvider.Port = ptr.To[int32](9090) })
	secretData(t, ns, "web-conn", map[string]string{
		workloadv1alpha1.AppBundleEndpointKey:  "web." + ns + ".svc",
		workloadv1alpha1.AppBundlePortKey:      "9090",
		workloadv1alpha1.AppBundleClusterIPKey: svc.Spec.ClusterIP,
	})
	env.Update(t, ab, func() { ab.Spec.ForProvider.Service = workloadv1alpha1.ServiceNone })
	secretData(t, ns, "web-conn", map[string]string{
		workloadv1alpha1.AppBundleEndpointKey:  "",
		workloadv1alpha1.AppBundlePortKey:      "",
		workloadv1alpha1.AppBundleClusterIPKey: "",
	})
	noSecretCache(t)
}

// noSecretCache checks that publishing connection details did not make the
// provider list or watch the Secrets of the whole cluster: it reads the one
// it writes from the API server.
func noSecretCache(t *testing.T) {
	t.Helper()
	if l := env.ManagerWrites.All("/api/v1/secrets"); len(l) > 0 {
		t.Errorf("the provider lists or watches every Secret: %v", l)
	}
}

func TestImmortalContainerPublishesItsPod(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t, "conn-immortal", nil)
	ic := immortal(ns, "web")
	ic.Spec.WriteConnectionSecretToReference = &xpv2.LocalSecretReference{Name: "web-conn"}
	env.Create(t, ic)

	// No kubelet here: the pod has no IP until the test gives it one.
	pod := podAfter(t, ns, "web", "")
	secretData(t, ns, "web-conn", map[string]string{workloadv1alpha1.ImmortalContainerPodNameKey: "web-immortalpod", workloadv1alpha1.ImmortalContainerPodIPKey: ""})
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, "10.244.0.17"
	pod.Status.PodIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	secretData(t, ns, "web-conn", map[string]string{
		workloadv1alpha1.ImmortalContainerPodNameKey: "web-immortalpod",
		workloadv1alpha1.ImmortalContainerPodIPKey:   "10.244.0.17",
	})

	// The pod ends: its IP is no longer published, its name is.
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	secretData(t, ns, "web-conn", map[string]string{workloadv1alpha1.ImmortalContainerPodNameKey: "web-immortalpod", workloadv1alpha1.ImmortalContainerPodIPKey: ""})
	next := podAfter(t, ns, "web", pod.UID)
	next.Status.Phase, next.Status.PodIP = corev1.PodRunning, "10.244.0.18"
	next.Status.PodIPs = []corev1.PodIP{{IP: next.Status.PodIP}}
	if err := env.Client.Status().Update(ctx, next); err != nil {
		t.Fatal(err)
	}
	secretData(t, ns, "web-conn", map[string]string{
		workloadv1alpha1.ImmortalContainerPodNameKey: "web-immortalpod",
		workloadv1alpha1.ImmortalContainerPodIPKey:   "10.244.0.18",
	})
	noSecretCache(t)
}
