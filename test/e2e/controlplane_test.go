//go:build e2e

// Package e2e holds tests that run against a live Kubernetes API server; see cluster/local/e2e.sh.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	pollInterval = 250 * time.Millisecond
	pollTimeout  = time.Minute
)

// newClient returns a client for the cluster named by $KUBECONFIG.
func newClient(t *testing.T) client.Client {
	t.Helper()
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		t.Fatal("KUBECONFIG is not set: point it at a cluster, e.g. with eval \"$(cluster/local/cluster-up.sh)\", or run cluster/local/e2e.sh")
	}
	paths := filepath.SplitList(kubeconfig)
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			t.Fatalf("KUBECONFIG path %q is relative, but go test runs tests in their package directory: make it absolute", p)
		}
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		t.Fatalf("cannot load KUBECONFIG %q: %v", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("cannot create client: %v", err)
	}
	return c
}

// poll calls cond until it returns true, failing the test with the last state cond reported if it
// does not within pollTimeout. cond returns a description of what it observed; an error from it
// is retried, as the state it reads converges.
func poll(ctx context.Context, t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		done, observed, err := cond(ctx)
		if err != nil {
			observed = err.Error()
		}
		last = observed
		return done && err == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v; last observed: %s", what, err, last)
	}
	t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
}

// TestControlPlaneRunsADeploymentEndToEnd checks that the control plane runs workloads end to end: a Deployment gets
// a ReplicaSet, its pods are scheduled and run, it becomes Available, and deleting it garbage
// collects the ReplicaSet and pods.
func TestControlPlaneRunsADeploymentEndToEnd(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-controlplane-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("cannot create namespace: %v", err)
	}
	t.Cleanup(func() { deleteNamespace(t, c, ns) })

	podLabels := map[string]string{"app": "e2e-fake"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fake", Namespace: ns.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					// Never pulled: kwok fakes the node and the containers.
					Containers: []corev1.Container{{Name: "fake", Image: "example.invalid/e2e/fake:v1"}},
				},
			},
		},
	}
	if err := c.Create(ctx, deploy); err != nil {
		t.Fatalf("cannot create deployment: %v", err)
	}
	inNamespace := client.InNamespace(ns.Name)
	selected := client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(podLabels)}

	poll(ctx, t, "deployment available", func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
			return false, "", err
		}
		s := deploy.Status
		available := false
		for _, cond := range s.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				available = true
			}
		}
		observed := fmt.Sprintf("available=%t replicas=%d ready=%d availableReplicas=%d", available, s.Replicas, s.ReadyReplicas, s.AvailableReplicas)
		return available && s.ObservedGeneration == deploy.Generation && s.AvailableReplicas == 2, observed, nil
	})

	poll(ctx, t, "pods running", func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, inNamespace, selected); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running == 2 && len(pods.Items) == 2, fmt.Sprintf("%d pods, %d running", len(pods.Items), running), nil
	})

	rss := &appsv1.ReplicaSetList{}
	if err := c.List(ctx, rss, inNamespace); err != nil {
		t.Fatalf("cannot list replicasets: %v", err)
	}
	if len(rss.Items) != 1 || !metav1.IsControlledBy(&rss.Items[0], deploy) {
		t.Fatalf("want one replicaset controlled by deployment %s, got %d replicasets", deploy.Name, len(rss.Items))
	}
	rs := &rss.Items[0]

	if err := c.Delete(ctx, deploy, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("cannot delete deployment: %v", err)
	}
	poll(ctx, t, "replicaset and pods garbage collected", func(ctx context.Context) (bool, string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(rs), &appsv1.ReplicaSet{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", err
		}
		rsGone := apierrors.IsNotFound(err)
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, inNamespace, selected); err != nil {
			return false, "", err
		}
		return rsGone && len(pods.Items) == 0, fmt.Sprintf("replicaset gone=%t, %d pods left", rsGone, len(pods.Items)), nil
	})
}

// deleteNamespace deletes ns and waits until the namespace controller has removed it.
func deleteNamespace(t *testing.T, c client.Client, ns *corev1.Namespace) {
	t.Helper()
	// t.Context is already cancelled when cleanups run.
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	if err := c.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
		t.Errorf("cannot delete namespace %s: %v", ns.Name, err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("namespace %s not deleted: %v", ns.Name, err)
	}
}
