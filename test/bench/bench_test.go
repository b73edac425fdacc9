//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// provider is the bench's view of the cluster the provider process acts on.
func provider(b *testing.B) *testenv.Env {
	b.Helper()
	return env
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func namespace(b *testing.B, c client.Client, prefix string) string {
	b.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	return ns.Name
}

// BenchmarkImmortalContainerRecreate deletes the immortal pod b.N times and
// measures the time from the delete call until its successor exists.
func BenchmarkImmortalContainerRecreate(b *testing.B) {
	e := provider(b)
	ctx := context.Background()
	ns := namespace(b, e.Client, "bench-immortal")
	ic := &workloadv1alpha1.ImmortalContainer{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
		Spec:       workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx"}},
	}
	if err := e.Client.Create(ctx, ic); err != nil {
		b.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "bench-immortalpod"}
	pod := &corev1.Pod{}
	next := func(prev types.UID) error {
		return wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := e.Client.Get(ctx, key, pod)
			return err == nil && pod.UID != prev && pod.DeletionTimestamp == nil, nil
		})
	}
	if err := next(""); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		prev := pod.UID
		start := time.Now()
		if err := e.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			b.Fatal(err)
		}
		if err := next(prev); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
}

// BenchmarkAppBundlesToReady applies BENCH_APPBUNDLES (default 1000) AppBundles
// at once, each with a volume for its claim, and measures the time until all
// are Ready (their Deployments Available on kwok's fake node).
func BenchmarkAppBundlesToReady(b *testing.B) {
	e := provider(b)
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("BENCH_APPBUNDLES")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		ns := namespace(b, e.Client, "bench-bundles")
		parallel(b, n, func(i int) error {
			return e.Client.Create(ctx, &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", ns, i)},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/bench"}},
					ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: fmt.Sprintf("app-%d-data", i)},
				},
			})
		})
		b.StartTimer()
		start := time.Now()
		parallel(b, n, func(i int) error {
			return e.Client.Create(ctx, &workloadv1alpha1.AppBundle{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: ns},
				Spec:       workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx:1.21"}},
			})
		})
		if err := awaitReady(ctx, ns, n, 30*time.Minute, &workloadv1alpha1.AppBundleList{}); err != nil {
			b.Fatalf("not all %d AppBundles Ready: %v", n, err)
		}
		took := time.Since(start)
		b.ReportMetric(took.Seconds(), "s-to-all-ready")
		b.ReportMetric(float64(n)/took.Seconds(), "MRs/s")
		b.StopTimer()
		deleteNamespaces(e.Client, ns)
		b.StartTimer()
	}
}

// parallel runs fn for 0..n-1 on 32 workers.
func parallel(b *testing.B, n int, fn func(i int) error) {
	b.Helper()
	parallelN(b, 32, n, fn)
}

// parallelN runs fn for 0..n-1 on workers goroutines.
func parallelN(b *testing.B, workers, n int, fn func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkConfigRolloutChangeToTemplate changes a ConfigMap b.N times and
// measures the time from the update call until the consuming Deployment's pod
// template carries the new hash (its generation moves on). The first change
// rolls it from the baseline the rollout recorded in its status when it
// started to follow it, without rolling it; the others from the hash the one
// before wrote.
func BenchmarkConfigRolloutChangeToTemplate(b *testing.B) {
	e := provider(b)
	ctx := context.Background()
	ns := namespace(b, e.Client, "bench-rollout")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "0"}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}}}},
			},
		},
	}
	cr := &workloadv1alpha1.ConfigRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
			ConfigMaps: []workloadv1alpha1.SourceRef{{Name: "conf"}},
			Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "web"}},
			// The benchmark rolls the Deployment once per iteration: the default rollout limit (5 within 10m) would hold it back.
			RolloutLimit: &workloadv1alpha1.RolloutLimit{Rollouts: 1000, Within: &metav1.Duration{Duration: 10 * time.Second}},
		}},
	}
	for _, o := range []client.Object{cm, d, cr} {
		if err := e.Client.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	key := types.NamespacedName{Namespace: ns, Name: "web"}
	stamped := func(after int64) error {
		return wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			err := e.Client.Get(ctx, key, d)
			return err == nil && d.Generation > after && d.Spec.Template.Annotations[configrollout.AnnotationHash] != "", nil
		})
	}
	// The rollout follows the Deployment without rolling it: Ready, with the
	// current hash as the Deployment's baseline in its status.
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return false, nil //nolint:nilerr // Poll again.
		}
		if err := e.Client.Get(ctx, key, d); err != nil {
			return false, nil //nolint:nilerr // Poll again.
		}
		if h := d.Spec.Template.Annotations[configrollout.AnnotationHash]; h != "" || d.Generation != 1 {
			return false, fmt.Errorf("the rollout wrote to Deployment web (hash %q, generation %d) when it started to follow it", h, d.Generation)
		}
		st := cr.Status.AtProvider
		return st.Hash != "" && len(st.Workloads) == 1 && st.Workloads[0].Baseline && st.Workloads[0].Hash == st.Hash &&
			cr.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		gen := d.Generation
		cm.Data["k"] = strconv.Itoa(i + 1)
		start := time.Now()
		if err := e.Client.Update(ctx, cm); err != nil {
			b.Fatal(err)
		}
		if err := stamped(gen); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
}
