//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// reachable labels a namespace so the default ClusterProviderConfig reaches it.
var reachable = map[string]string{"clusterops.io/reachable": "true"}

// BenchmarkIdleCost converges BENCH_IDLE_MRS (default 1000) managed resources,
// a fifth of each kind, then counts for BENCH_IDLE_WINDOW (default 60s) the
// requests the provider sends: by its own client-go metrics, and by the API
// server's count of its FlowSchema. Converged, a provider should write nothing
// and read little: its kinds learn of changes from watches.
func BenchmarkIdleCost(b *testing.B) {
	e := provider(b)
	ctx := context.Background()
	n := envInt("BENCH_IDLE_MRS", 1000) / 5
	window := time.Minute
	if d, err := time.ParseDuration(os.Getenv("BENCH_IDLE_WINDOW")); err == nil && d > 0 {
		window = d
	}
	for range b.N {
		b.StopTimer()
		src := namespaceWith(b, e.Client, "bench-idle", reachable)
		dst := namespaceWith(b, e.Client, "bench-idle-dst", reachable)
		mrs := idleFleet(src, dst, n)
		parallel(b, n, func(i int) error { return e.Client.Create(ctx, pv(src, fmt.Sprintf("bundle-%d-data", i))) })
		parallel(b, len(mrs), func(i int) error { return e.Client.Create(ctx, mrs[i]) })
		start := time.Now()
		if err := allReady(ctx, src, 4*n, 15*time.Minute); err != nil {
			b.Fatal(err)
		}
		b.Logf("%d managed resources converged in %s", 5*n, time.Since(start).Round(time.Second))
		// Let the last status writes and requeues of convergence pass.
		time.Sleep(10 * time.Second)

		b.StartTimer()
		before, err := countRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(window)
		after, err := countRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s := window.Seconds()
		b.ReportMetric(float64(5*n), "MRs")
		b.ReportMetric(after.clientWrites-before.clientWrites, "writes")
		b.ReportMetric((after.client-before.client)/s, "client-req/s")
		b.ReportMetric((after.server-before.server)/s, "server-req/s")

		// One safety-net poll round: a label change makes the managed
		// reconciler check each resource once, as a poll does. What the
		// provider sends until it settles again is the cost of a round.
		before, err = countRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		parallel(b, len(mrs), func(i int) error {
			if _, ok := mrs[i].(interface {
				GetManagementPolicies() xpv2.ManagementPolicies
			}); !ok {
				return nil // Not a managed resource.
			}
			return e.Client.Patch(ctx, mrs[i], client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"bench-poll":"1"}}}`)))
		})
		pass, err := quietCounts(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(pass.client-before.client, "pass-requests")
		b.ReportMetric(pass.clientWrites-before.clientWrites, "pass-writes")

		start = time.Now()
		cleanUp(b, e.Client, src, dst)
		b.Logf("%d managed resources deleted in %s", 5*n, time.Since(start).Round(time.Second))
	}
}

// quietCounts waits until the provider sends at most one request a second over
// 10 s, and returns its counts.
func quietCounts(ctx context.Context) (requestCounts, error) { return quietCountsPolling(ctx, 0) }

// quietCountsPolling is quietCounts for a provider with mrs converged managed
// resources, whose safety-net polls (--poll's default of 10 minutes, up to 3
// reads each) are allowed on top: from 10 minutes after a fleet was made,
// 10,000 of them poll at about 50 requests a second for good, and a
// provider that does only that is quiet.
func quietCountsPolling(ctx context.Context, mrs int) (requestCounts, error) {
	allowed := 10 + 3*mrs*10/600
	var seen []requestCounts
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := countRequests(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // Try again.
		}
		seen = append(seen, c)
		return len(seen) > 10 && c.client-seen[len(seen)-11].client <= float64(allowed), nil
	})
	if len(seen) == 0 {
		return requestCounts{}, err
	}
	return seen[len(seen)-1], err
}

// idleFleet is n managed resources of each kind in ns: ImmortalContainers,
// AppBundles (their volumes made by the caller), ConfigRollouts with their
// ConfigMaps and Deployments (no replicas), CopyRules copying one ConfigMap
// each into dst, and dry-run ChaosAgents whose next round is an hour away.
// ChaosAgents are listed last: they are Ready only after a round, which
// allReady does not wait for.
func idleFleet(ns, dst string, n int) []client.Object {
	var out []client.Object
	zero := int32(0)
	for i := range n {
		cm := fmt.Sprintf("conf-%d", i)
		out = append(out,
			&workloadv1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("immortal-%d", i), Namespace: ns},
				Spec: workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx"}}},
			&workloadv1alpha1.AppBundle{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bundle-%d", i), Namespace: ns},
				Spec: workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx"}}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: ns}, Data: map[string]string{"k": "v"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns}, Spec: appsv1.DeploymentSpec{
				Replicas: &zero,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": cm}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": cm}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx",
						EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}},
				},
			}},
			&workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rollout-%d", i), Namespace: ns},
				Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: workloadv1alpha1.ConfigRolloutParameters{
					ConfigMaps: []workloadv1alpha1.SourceRef{{Name: cm}},
					Workloads:  []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: fmt.Sprintf("web-%d", i)}},
				}}},
			&copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("copy-%d", i), Namespace: ns},
				Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
					Kind: copyv1alpha1.KindConfigMap, Names: []string{cm}, Namespaces: []string{dst},
				}}},
		)
	}
	for i := range n {
		out = append(out, &chaosv1alpha1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("chaos-%d", i), Namespace: ns},
			Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
				TantrumMode: true, PodTolerance: 1000, Eagerness: 1, DryRun: true,
				Interval: metav1.Duration{Duration: time.Hour},
			}}})
	}
	return out
}

// pv is a volume reserved for claim ns/name, so AppBundles' claims bind.
func pv(ns, claim string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/bench"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: claim},
		},
	}
}

// allReady waits until want managed resources in ns, of the kinds with a Ready
// condition that holds without an action (all but ChaosAgent), are Ready.
func allReady(ctx context.Context, ns string, want int, timeout time.Duration) error {
	return awaitReady(ctx, ns, want, timeout, &workloadv1alpha1.ImmortalContainerList{}, &workloadv1alpha1.AppBundleList{}, &workloadv1alpha1.ConfigRolloutList{}, &copyv1alpha1.CopyRuleList{})
}

// awaitReady waits until want managed resources of the lists' kinds in ns
// (every namespace when ns is "") are Ready. It watches rather than lists: listing a thousand resources every
// second would load the API server the benchmark measures through.
//
// The watch must cost the API server as little in the provider's phase as in
// the floor's. A typed watch on a saturated machine fell behind, the API server
// ended it as unresponsive (up to 164 times in one run at 10,000) and each new
// one replayed every object: so it reads the stream itself, decodes only names
// and conditions, and resumes from the last version it saw (bookmarks keep
// that version fresh); only a version too old to resume from lists again.
func awaitReady(ctx context.Context, ns string, want int, timeout time.Duration, lists ...client.ObjectList) error {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	ready := map[string]bool{} // resource/namespace/name → Ready
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		return n
	}
	paths := make([]string, 0, len(lists))
	for _, l := range lists {
		gvk, err := apiutil.GVKForObject(l, env.Scheme)
		if err != nil {
			return err
		}
		m, err := env.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}, gvk.Version)
		if err != nil {
			return err
		}
		p := "/apis/" + gvk.Group + "/" + gvk.Version + "/"
		if ns != "" {
			p += "namespaces/" + ns + "/"
		}
		paths = append(paths, p+m.Resource.Resource)
	}
	readyOf := func(o readyObject) bool {
		for _, c := range o.Status.Conditions {
			if c.Type == string(xpv2.TypeReady) {
				return c.Status == string(corev1.ConditionTrue)
			}
		}
		return false
	}
	// list reads every object of path, in pages, as one snapshot, in place
	// of what ready held for path, and returns the snapshot's version. A
	// list, not a new watch's initial events: a watch that falls behind
	// while it sends 10,000 objects is ended by the API server (as
	// unresponsive), and a new one sends them all again; and a watch ended
	// in the middle of them cannot be resumed, as they come each at its own
	// version in no order.
	list := func(path string) (string, error) {
		seen := map[string]bool{}
		cont := ""
		for {
			req := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("limit", "500")
			if cont != "" {
				req = req.Param("continue", cont)
			}
			body, err := req.Stream(ctx)
			if err != nil {
				return "", err
			}
			var l struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
					Continue        string `json:"continue"`
				} `json:"metadata"`
				Items []readyObject `json:"items"`
			}
			err = json.NewDecoder(body).Decode(&l)
			_ = body.Close()
			if err != nil {
				return "", err
			}
			for _, o := range l.Items {
				seen[path+"/"+o.Metadata.Namespace+"/"+o.Metadata.Name] = readyOf(o)
			}
			if cont = l.Metadata.Continue; cont == "" {
				mu.Lock()
				for k := range ready {
					if strings.HasPrefix(k, path+"/") {
						delete(ready, k)
					}
				}
				maps.Copy(ready, seen)
				mu.Unlock()
				return l.Metadata.ResourceVersion, nil
			}
		}
	}
	// watchOnce reads one watch from rv to its end and returns the version to
	// go on from: "" when it must list again.
	//
	// Each watch lasts a minute at most, and a request that has not ended 30
	// s after is given up: a watch request can wait minutes on its HTTP/2
	// connection to be sent, and the scenario with it.
	watchOnce := func(path, rv string) string {
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		body, err := cs.CoreV1().RESTClient().Get().AbsPath(path).
			Param("watch", "true").Param("allowWatchBookmarks", "true").Param("resourceVersion", rv).
			Param("timeoutSeconds", "60").Stream(ctx)
		if kerrors.IsGone(err) || kerrors.IsResourceExpired(err) {
			return ""
		}
		if err != nil {
			time.Sleep(time.Second)
			return rv
		}
		defer body.Close()
		dec := json.NewDecoder(body)
		// A watch that ends at once with nothing in it, or with an error
		// other than an expired version, is listed again after a second.
		// Resumed at once from the same version, such a watch spins: 2,000
		// requests a second, each ended before its first event, while every
		// resource it waits for is Ready.
		began, got := time.Now(), false
		for {
			var ev readyEvent
			if err := dec.Decode(&ev); err != nil {
				if !got && time.Since(began) < time.Second {
					time.Sleep(time.Second)
					return ""
				}
				return rv
			}
			got = true
			switch ev.Type {
			case string(watch.Error):
				if ev.Object.Code != http.StatusGone {
					time.Sleep(time.Second)
				}
				return ""
			case string(watch.Bookmark):
				rv = ev.Object.Metadata.ResourceVersion
				continue
			}
			rv = ev.Object.Metadata.ResourceVersion
			mu.Lock()
			ready[path+"/"+ev.Object.Metadata.Namespace+"/"+ev.Object.Metadata.Name] = ev.Type != string(watch.Deleted) && readyOf(ev.Object.readyObject)
			mu.Unlock()
		}
	}
	for _, p := range paths {
		go func() {
			rv := ""
			for ctx.Err() == nil {
				if rv == "" {
					var err error
					if rv, err = list(p); err != nil {
						time.Sleep(time.Second)
						continue
					}
				}
				rv = watchOnce(p, rv)
			}
		}()
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for count() < want {
		select {
		case <-ctx.Done():
			return &notReady{ready: count(), want: want, err: ctx.Err()}
		case <-t.C:
		}
	}
	return nil
}

// notReady is awaitReady's error when its time ran out: how many were Ready.
type notReady struct {
	ready, want int
	err         error
}

func (e *notReady) Error() string {
	return fmt.Sprintf("%d of %d managed resources Ready: %v", e.ready, e.want, e.err)
}

func (e *notReady) Unwrap() error { return e.err }

// readyObject is the part of a managed resource awaitReady reads: its
// identity, version and conditions.
type readyObject struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

// readyEvent is the part of a watch event awaitReady reads: a managed
// resource, or an error's code.
type readyEvent struct {
	Type   string `json:"type"`
	Object struct {
		Code int `json:"code"`
		readyObject
	} `json:"object"`
}

// cleanUp deletes every managed resource in the namespaces, waits until the
// provider has finished with them, and deletes the namespaces. On a control
// plane that is discarded after the run it abandons them instead.
func cleanUp(b *testing.B, c client.Client, nss ...string) {
	b.Helper()
	ctx := context.Background()
	kinds := []client.Object{&workloadv1alpha1.ImmortalContainer{}, &workloadv1alpha1.AppBundle{}, &workloadv1alpha1.ConfigRollout{}, &copyv1alpha1.CopyRule{}, &chaosv1alpha1.ChaosAgent{}}
	lists := []client.ObjectList{&workloadv1alpha1.ImmortalContainerList{}, &workloadv1alpha1.AppBundleList{}, &workloadv1alpha1.ConfigRolloutList{}, &copyv1alpha1.CopyRuleList{}, &chaosv1alpha1.ChaosAgentList{}}
	if disposable() {
		abandon(b, c, lists, nss)
		return
	}
	for _, ns := range nss {
		for _, k := range kinds {
			if err := c.DeleteAllOf(ctx, k, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 15*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, ns := range nss {
			for _, l := range lists {
				if err := c.List(ctx, l, client.InNamespace(ns), client.Limit(1)); err != nil {
					return false, nil //nolint:nilerr // Try again.
				}
				if meta.LenList(l) > 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("managed resources not gone: %v", err)
	}
	deleteNamespaces(c, nss...)
}

// BenchmarkMemory fills a namespace with BENCH_MEM_UNSELECTED (default 10000)
// ConfigMaps that no rule selects and BENCH_MEM_SELECTED (default 1000) more,
// each with 1 KiB of data, and a CopyRule whose selector picks none of them
// yet. Converged, the provider's live heap is the base: the provider with the
// rule's controller, clients and watches running. Then the second lot is
// labelled so the rule selects and copies it: what the live heap grows by is
// what selected objects cost, compared with their raw size. Unselected objects
// must cost nothing: no watch or cache may hold them.
func BenchmarkMemory(b *testing.B) {
	e := provider(b)
	ctx := context.Background()
	unselected, selected := envInt("BENCH_MEM_UNSELECTED", 10000), envInt("BENCH_MEM_SELECTED", 1000)
	data := strings.Repeat("x", 1024)
	for range b.N {
		b.StopTimer()
		startHeap, startRSS := memory(b)
		src := namespaceWith(b, e.Client, "bench-mem", reachable)
		dst := namespaceWith(b, e.Client, "bench-mem-dst", reachable)
		parallel(b, unselected+selected, func(i int) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: src}, Data: map[string]string{"data": data}}
			return e.Client.Create(ctx, cm)
		})
		rule := &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Name: "selected", Namespace: src},
			Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
				Kind: copyv1alpha1.KindConfigMap, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench-mem": "selected"}}, Namespaces: []string{dst},
			}}}
		if err := e.Client.Create(ctx, rule); err != nil {
			b.Fatal(err)
		}
		if err := allReady(ctx, src, 1, 10*time.Minute); err != nil {
			b.Fatal(err)
		}
		time.Sleep(5 * time.Second) // Let the rule's watches start and list.
		baseHeap, baseRSS := memory(b)

		b.StartTimer()
		parallel(b, selected, func(i int) error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", unselected+i), Namespace: src}}
			return e.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"bench-mem":"selected"}}}`)))
		})
		if err := copies(ctx, e.Client, dst, selected, 10*time.Minute); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(5 * time.Second) // Let the watches of the copies fill.
		heap, rss := memory(b)
		raw := 0
		l := &corev1.ConfigMapList{}
		if err := e.Client.List(ctx, l, client.InNamespace(src), client.MatchingLabels{"bench-mem": "selected"}); err != nil {
			b.Fatal(err)
		}
		for i := range l.Items {
			j, _ := json.Marshal(&l.Items[i])
			raw += len(j)
		}
		b.ReportMetric(float64(raw), "selected-raw-B")
		b.ReportMetric(startHeap, "start-heap-B")
		b.ReportMetric(startRSS, "start-rss-B")
		b.ReportMetric(baseHeap, "base-heap-B")
		b.ReportMetric(baseRSS, "base-rss-B")
		b.ReportMetric(heap, "heap-B")
		b.ReportMetric(rss, "rss-B")
		b.ReportMetric((heap-baseHeap)/float64(raw), "heap-growth/selected-raw")
		if dir := os.Getenv("BENCH_OUT"); dir != "" {
			if err := prov.profile("heap", "gc=1", filepath.Join(dir, "memory.heap.pprof")); err != nil {
				b.Log(err)
			}
		}
		cleanUp(b, e.Client, src, dst)
	}
}

// copies waits until namespace ns holds want ConfigMaps.
func copies(ctx context.Context, c client.Client, ns string, want int, timeout time.Duration) error {
	got := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return false, nil //nolint:nilerr // Try again.
		}
		got = 0
		for _, o := range l.Items {
			if o.Name != "kube-root-ca.crt" {
				got++
			}
		}
		return got >= want, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d copies in namespace %s: %w", got, want, ns, err)
	}
	return nil
}

// memory is the provider's live heap (bytes of reachable objects after a
// garbage collection) and its resident set size.
func memory(b *testing.B) (float64, float64) {
	b.Helper()
	if err := prov.collectGarbage(); err != nil {
		b.Fatal(err)
	}
	m, err := prov.providerMetrics()
	if err != nil {
		b.Fatal(err)
	}
	rss, err := prov.rssBytes()
	if err != nil {
		b.Fatal(err)
	}
	return m.sum("go_memstats_heap_alloc_bytes", nil), rss
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil && v > 0 {
		return v
	}
	return def
}

// namespaceWith creates a namespace with a unique name starting with prefix.
func namespaceWith(b *testing.B, c client.Client, prefix string, lbls map[string]string) string {
	b.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: lbls}}
	if err := c.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	return ns.Name
}

// abandon removes the managed resources in the namespaces without the
// provider deleting what they made, for a control plane that is discarded
// after the run: the provider stops, the resources lose their finalizers and
// are deleted, and a fresh provider starts for whatever runs next in the
// process. Waiting for the provider to delete 1,000 resources properly took
// about 50 s of the bench, and the next scenario's provider must not find them.
func abandon(b *testing.B, c client.Client, lists []client.ObjectList, nss []string) {
	b.Helper()
	ctx := context.Background()
	prov.stop()
	for _, ns := range nss {
		for _, l := range lists {
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			objs, err := meta.ExtractList(l)
			if err != nil {
				b.Fatal(err)
			}
			parallel(b, len(objs), func(i int) error {
				o := objs[i].(client.Object)
				err := c.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
				if client.IgnoreNotFound(err) != nil {
					return err
				}
				return client.IgnoreNotFound(c.Delete(ctx, o))
			})
		}
	}
	var err error
	if prov, err = startProvider(ctx, prov.bin, prov.kubeconfig, prov.rate); err != nil {
		b.Fatal(err)
	}
}
