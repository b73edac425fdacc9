//go:build bench

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/configrollout"
)

// A fleet scenario applies N managed resources of one kind at once, in one
// namespace or spread over N/10, each referencing objects of its own, and
// measures what converging them costs: the time until all are Ready against
// a raw client doing the writes the provider must do, reconciles and API
// requests per resource, memory and goroutines per resource, the watches the
// provider holds, how fast it reacts to a change while the fleet converges
// and after, and what a restart with the converged fleet costs.
//
// One scenario per process (FLEET_KIND, FLEET_N, FLEET_LAYOUT; make
// bench-fleet runs them all): each starts from a fresh provider, and the next
// one must not find this one's resources, so they are abandoned at the end.

// fleetProbes is how many extra resources, converged before the fleet is
// applied, take the changes whose reaction time is measured.
const fleetProbes = 10

// floorLabel marks the raw client's stand-ins for managed resources.
const floorLabel = "bench.clusterops.io/floor"

// fleetKind is what a scenario needs to know of a kind.
type fleetKind struct {
	list func() client.ObjectList
	// prepare makes what every resource of the fleet shares (copy targets,
	// volumes), given the fleet's namespaces and the index count.
	prepare func(ctx context.Context, b *testing.B, f *fleet)
	// prereqs are the objects resource i references, made before the clock
	// starts.
	prereqs func(ns string, i int) []client.Object
	// mr is managed resource name using the prereqs of index i.
	mr func(ns, name string, i int, f *fleet) client.Object
	// floor does what the provider must write for resource i other than its
	// own metadata and status: the objects it makes or changes. It returns
	// how many writes that took.
	floor func(ctx context.Context, c client.Client, ns, name string, i int, f *fleet) (int, error)
	// floorReady, when set, waits until what floor made is ready, before the
	// floor's status writes: a Ready AppBundle waits for its Deployment.
	floorReady func(ctx context.Context, f *fleet) error
	// probe makes a change to what resource i references and returns a check
	// that the provider acted on it.
	probe func(ctx context.Context, c client.Client, ns, name string, i int, f *fleet) (probeCheck, error)
}

// fleet is one scenario's layout.
type fleet struct {
	kind   string
	n      int
	nss    []string
	shared []string // the copy targets of CopyRules
}

func (f *fleet) ns(i int) string { return f.nss[i%len(f.nss)] }

// fleetResult is what a scenario measured; make bench-fleet's report reads it.
type fleetResult struct {
	Kind, Layout  string
	N, Namespaces int

	Seconds, FloorSeconds           float64
	FloorWritesPerMR, WritesPerMR   float64
	ReconcilesPerMR, RequestsPerMR  float64
	ReconcilesBy                    map[string]float64 // "controller result" → per managed resource
	Requests                        map[string]float64 // "verb resource" → per managed resource
	BaseHeap, Heap, BaseRSS, RSS    float64
	BaseGoroutines, Goroutines      float64
	Watches, APIServerWatchersDelta float64
	// CPU seconds each component used while the floor's writes ran and
	// while the provider converged the fleet (cpuSeconds).
	FloorCPU, CPU map[string]float64 `json:",omitempty"`
	Cores         int                `json:",omitempty"`

	DuringMs, AfterMs []float64 // event → action, while converging and after
	// Urgent is what the provider's urgent reconciles (those a change
	// caused: the probes' and any other) took while the fleet converged: the
	// wait for a worker and the reconcile itself, from its histograms.
	Urgent *urgentTimes `json:",omitempty"`

	// The probes' reactions while the fleet converged, and what one reaction
	// cost once it was idle: reconciles, requests and writes, subtracted from
	// the fleet's (…PerMR, Requests and ReconcilesBy are per fleet resource).
	DuringReactions, ProbeReconciles, ProbeRequests, ProbeWrites float64

	RestartSeconds, RestartRequests, RestartWrites float64
	RestartRequestsBy                              map[string]float64 // "verb resource" → count
	// RestartNotIdle: the restarted provider still sent requests when the
	// bench stopped waiting (RestartSeconds is then how long it waited).
	RestartNotIdle bool `json:",omitempty"`
	// Commit is the provider's source the scenario ran ($BENCH_COMMIT).
	Commit string `json:",omitempty"`
	// WallSeconds is the whole scenario's time, setup and restart included:
	// what it adds to the tier's.
	WallSeconds float64 `json:",omitempty"`
	// Phases is what each step of the scenario took, in seconds, by name:
	// where the wall time goes (setup, the waits for the controllers, the
	// timed phases, the restart).
	Phases map[string]float64 `json:",omitempty"`
}

var fleetKinds = map[string]fleetKind{
	"configrollout":      configRolloutKind(false),
	"configrollout-auto": configRolloutKind(true),
	"copyrule":           copyRuleKind(1),
	"copyrule-x10":       copyRuleKind(10),
	"appbundle": {
		list: func() client.ObjectList { return &workloadv1alpha1.AppBundleList{} },
		prepare: func(ctx context.Context, b *testing.B, f *fleet) {
			// A volume for every claim: the fleet's, the floor's, the probes'.
			parallel(b, f.n, func(i int) error {
				if err := env.Client.Create(ctx, pv(f.ns(i), fmt.Sprintf("mr-%d-data", i))); err != nil {
					return err
				}
				return env.Client.Create(ctx, pv(f.ns(i), fmt.Sprintf("floor-%d-data", i)))
			})
			parallel(b, fleetProbes, func(j int) error {
				return env.Client.Create(ctx, pv(f.ns(j), fmt.Sprintf("probe-%d-data", j)))
			})
		},
		mr: func(ns, name string, _ int, _ *fleet) client.Object {
			return &workloadv1alpha1.AppBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: workloadv1alpha1.AppBundleSpec{ForProvider: workloadv1alpha1.AppBundleParameters{Image: "nginx"}}}
		},
		floor: func(ctx context.Context, c client.Client, ns, name string, _ int, _ *fleet) (int, error) {
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name + "-data", Namespace: ns, Labels: map[string]string{floorLabel: "true"}},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				}}
			if err := c.Create(ctx, claim); err != nil {
				return 0, err
			}
			one := int32(1)
			sel := map[string]string{"app": name}
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{floorLabel: "true"}}, Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: sel},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "app", Image: "nginx", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
						Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
							PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}},
					},
				},
			}}
			return 2, c.Create(ctx, d)
		},
		floorReady: func(ctx context.Context, f *fleet) error {
			return awaitFloor(ctx, f, &appsv1.DeploymentList{}, func(o client.Object) bool {
				d := o.(*appsv1.Deployment)
				return d.Status.AvailableReplicas >= 1
			})
		},
		probe: func(ctx context.Context, c client.Client, ns, name string, _ int, _ *fleet) (probeCheck, error) {
			d := &appsv1.Deployment{}
			key := types.NamespacedName{Namespace: ns, Name: name}
			if err := c.Get(ctx, key, d); err != nil {
				return probeCheck{}, err
			}
			// Drift: the provider puts its image back.
			d.Spec.Template.Spec.Containers[0].Image = "nginx:drifted"
			if err := c.Update(ctx, d); err != nil {
				return probeCheck{}, err
			}
			return probeCheck{d, func(o client.Object) bool {
				return o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image == "nginx"
			}}, nil
		},
	},
	"immortalcontainer": {
		list: func() client.ObjectList { return &workloadv1alpha1.ImmortalContainerList{} },
		mr: func(ns, name string, _ int, _ *fleet) client.Object {
			return &workloadv1alpha1.ImmortalContainer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: workloadv1alpha1.ImmortalContainerSpec{ForProvider: workloadv1alpha1.ImmortalContainerParameters{Image: "nginx"}}}
		},
		floor: func(ctx context.Context, c client.Client, ns, name string, _ int, _ *fleet) (int, error) {
			return 1, c.Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-immortalpod", Namespace: ns, Labels: map[string]string{floorLabel: "true"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "immortal", Image: "nginx"}}},
			})
		},
		floorReady: func(ctx context.Context, f *fleet) error {
			return awaitFloor(ctx, f, &corev1.PodList{}, func(o client.Object) bool {
				return o.(*corev1.Pod).Status.Phase == corev1.PodRunning
			})
		},
		probe: func(ctx context.Context, c client.Client, ns, name string, _ int, _ *fleet) (probeCheck, error) {
			p := &corev1.Pod{}
			key := types.NamespacedName{Namespace: ns, Name: name + "-immortalpod"}
			if err := c.Get(ctx, key, p); err != nil {
				return probeCheck{}, err
			}
			was := p.UID
			if err := c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
				return probeCheck{}, err
			}
			return probeCheck{p, func(o client.Object) bool {
				return o.GetUID() != was && o.GetDeletionTimestamp() == nil
			}}, nil
		},
	},
	"chaosagent": {
		list: func() client.ObjectList { return &chaosv1alpha1.ChaosAgentList{} },
		mr: func(ns, name string, _ int, _ *fleet) client.Object {
			return &chaosv1alpha1.ChaosAgent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: chaosv1alpha1.ChaosAgentSpec{ForProvider: chaosv1alpha1.ChaosAgentParameters{
					TantrumMode: true, PodTolerance: 1000, Eagerness: 1, DryRun: true,
					Interval: metav1.Duration{Duration: time.Hour},
				}}}
		},
		floor: func(ctx context.Context, c client.Client, ns, name string, _ int, _ *fleet) (int, error) {
			// A round reads the namespace's pods and reports in an event.
			if err := c.List(ctx, &corev1.PodList{}, client.InNamespace(ns)); err != nil {
				return 0, err
			}
			return 1, c.Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{GenerateName: name + ".", Namespace: ns},
				InvolvedObject: corev1.ObjectReference{Kind: "ChaosAgent", Namespace: ns, Name: name},
				Reason:         "NothingHappened", Message: "Nothing happened", Type: corev1.EventTypeNormal,
			})
		},
		probe: func(ctx context.Context, c client.Client, ns, name string, _ int, _ *fleet) (probeCheck, error) {
			ca := &chaosv1alpha1.ChaosAgent{}
			key := types.NamespacedName{Namespace: ns, Name: name}
			if err := c.Get(ctx, key, ca); err != nil {
				return probeCheck{}, err
			}
			ca.Spec.ForProvider.Eagerness = 3 - ca.Spec.ForProvider.Eagerness // 1 ↔ 2
			if err := c.Update(ctx, ca); err != nil {
				return probeCheck{}, err
			}
			gen := ca.Generation
			return probeCheck{ca, func(o client.Object) bool {
				return o.(*chaosv1alpha1.ChaosAgent).GetCondition(xpv2.TypeSynced).ObservedGeneration >= gen
			}}, nil
		},
	},
}

// copyRuleKind copies ConfigMap src-i of each rule into targets namespaces.
func copyRuleKind(targets int) fleetKind {
	return fleetKind{
		list: func() client.ObjectList { return &copyv1alpha1.CopyRuleList{} },
		prepare: func(ctx context.Context, b *testing.B, f *fleet) {
			f.shared = make([]string, targets)
			for t := range f.shared {
				f.shared[t] = namespaceWith(b, env.Client, "fleet-dst", map[string]string{"clusterops.io/reachable": "true"})
			}
		},
		prereqs: func(ns string, i int) []client.Object {
			return []client.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("src-%d", i), Namespace: ns}, Data: map[string]string{"k": "v"}}}
		},
		mr: func(ns, name string, i int, f *fleet) client.Object {
			return &copyv1alpha1.CopyRule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: copyv1alpha1.CopyRuleSpec{ForProvider: copyv1alpha1.CopyRuleParameters{
					Kind: copyv1alpha1.KindConfigMap, Names: []string{fmt.Sprintf("src-%d", i)}, Namespaces: f.shared,
				}}}
		},
		floor: func(ctx context.Context, c client.Client, ns, name string, i int, f *fleet) (int, error) {
			// Every source lives in ns, so the floor's copies are named apart
			// from the provider's by the floor resource's name too.
			for _, dst := range f.shared {
				if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-src-%d", ns, name, i), Namespace: dst, Labels: map[string]string{floorLabel: "true"}},
					Data: map[string]string{"k": "v"}}); err != nil {
					return 0, err
				}
			}
			return len(f.shared), nil
		},
		probe: func(ctx context.Context, c client.Client, ns, _ string, i int, f *fleet) (probeCheck, error) {
			v := strconv.FormatInt(time.Now().UnixNano(), 10)
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("src-%d", i), Namespace: ns}}
			if err := c.Patch(ctx, src, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"`+v+`"}}`))); err != nil {
				return probeCheck{}, err
			}
			cp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.shared[0], Name: src.Name}}
			return probeCheck{cp, func(o client.Object) bool {
				return o.(*corev1.ConfigMap).Data["k"] == v
			}}, nil
		},
	}
}

// awaitFloor waits until every floor object of the list's kind in the fleet's
// namespaces is ready.
func awaitFloor(ctx context.Context, f *fleet, l client.ObjectList, ready func(client.Object) bool) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		n := 0
		for _, ns := range f.nss {
			if err := env.Client.List(ctx, l, client.InNamespace(ns), client.HasLabels{floorLabel}); err != nil {
				return false, nil //nolint:nilerr // Try again.
			}
			_ = meta.EachListItem(l, func(o kruntime.Object) error {
				if ready(o.(client.Object)) {
					n++
				}
				return nil
			})
		}
		return n >= f.n, nil
	})
}

// BenchmarkFleet runs the scenario FLEET_KIND × FLEET_N × FLEET_LAYOUT ("one"
// namespace, or "spread" over N/10) and writes its result to
// $FLEET_OUT (default $BENCH_OUT/fleet)/<kind>-<layout>-<n>.json.
func BenchmarkFleet(b *testing.B) {
	kindName, layout := os.Getenv("FLEET_KIND"), os.Getenv("FLEET_LAYOUT")
	k, ok := fleetKinds[kindName]
	if !ok || (layout != "one" && layout != "spread") {
		b.Fatalf("FLEET_KIND %q or FLEET_LAYOUT %q unknown", kindName, layout)
	}
	n := envInt("FLEET_N", 100)
	began := time.Now()
	phases, lap := map[string]float64{}, began
	phase := func(name string) {
		phases[name] += time.Since(lap).Seconds()
		lap = time.Now()
	}
	ctx := context.Background()
	c := env.Client
	f := &fleet{kind: kindName, n: n}
	spread := 1
	if layout == "spread" {
		spread = max(1, n/10)
	}
	f.nss = make([]string, spread)
	run := strconv.FormatInt(time.Now().Unix()%100000, 10)
	parallel(b, spread, func(i int) error {
		f.nss[i] = fmt.Sprintf("fleet-%s-%s-%d", run, kindName, i)
		return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.nss[i]}})
	})
	if k.prepare != nil {
		k.prepare(ctx, b, f)
	}
	if k.prereqs != nil {
		parallel(b, n+fleetProbes, func(i int) error {
			for _, o := range k.prereqs(f.ns(i), i) {
				if err := c.Create(ctx, o); err != nil {
					return err
				}
			}
			return nil
		})
	}
	r := fleetResult{Kind: kindName, Layout: layout, N: n, Namespaces: spread, Phases: phases}
	phase("setup")

	// The floor runs while no provider does: a raw client of the provider's
	// standing creates the resources, writes what the provider writes for
	// each (a metadata patch, standing for its finalizer; what it makes or
	// changes; its status), then deletes its stand-ins.
	prov.stop()
	// Each phase starts on a quiet control plane: the controllers' work on
	// what the setup made (a ReplicaSet for every new Deployment) is not
	// charged to the floor, nor the floor's (the rollouts of the Deployments
	// it made) to the provider.
	quiesce(ctx, b)
	phase("controllers after setup")
	floorCfg := rest.CopyConfig(env.Config)
	floorCfg.Impersonate = rest.ImpersonationConfig{UserName: floorUser}
	raw, err := client.New(floorCfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	anyNS := ""
	if spread == 1 {
		anyNS = f.nss[0]
	}
	// The floor's end is seen as the provider's is: by a watch of the
	// resources until every one is Ready. The watch costs the API server and
	// the bench alike in both.
	floorSeen := make(chan error, 1)
	go func() { floorSeen <- awaitReady(ctx, anyNS, n, 60*time.Minute, k.list()) }()
	var floorWrites atomic.Int64
	// FLEET_PROFILE names a directory for CPU profiles of the API server in
	// both phases and of the provider while it converges (their first
	// FLEET_PROFILE_SECONDS, default 60), and the provider's heap once
	// converged: what each phase costs, and where. FLEET_PROFILE_FLOOR_SECONDS
	// sets the floor's apart: a phase profiled whole is compared per resource.
	profileDir := os.Getenv("FLEET_PROFILE")
	profileSeconds := envInt("FLEET_PROFILE_SECONDS", 60)
	floorProfileSeconds := envInt("FLEET_PROFILE_FLOOR_SECONDS", profileSeconds)
	profilePath := func(what string) string {
		return filepath.Join(profileDir, fmt.Sprintf("%s-%s-%d.%s.pprof", kindName, layout, n, what))
	}
	apiProfiled := make(chan error, 1)
	b.ResetTimer()
	cpu := cpuSeconds()
	start := time.Now()
	if profileDir != "" {
		go func() { apiProfiled <- apiserverProfile(ctx, floorProfileSeconds, profilePath("floor-apiserver")) }()
	}
	parallelN(b, 32, n, func(i int) error {
		name := fmt.Sprintf("floor-%d", i)
		mr := k.mr(f.ns(i), name, i, f)
		mr.SetLabels(map[string]string{floorLabel: "true"})
		if err := raw.Create(ctx, mr); err != nil {
			return err
		}
		if err := raw.Patch(ctx, mr, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+floorLabel+`":"seen"}}}`))); err != nil {
			return err
		}
		w, err := k.floor(ctx, raw, f.ns(i), name, i, f)
		floorWrites.Add(int64(w) + 2)
		return err
	})
	if k.floorReady != nil {
		if err := k.floorReady(ctx, f); err != nil {
			b.Fatal(err)
		}
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	status := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Available","lastTransitionTime":"` + now + `"},{"type":"Synced","status":"True","reason":"ReconcileSuccess","lastTransitionTime":"` + now + `"}]}}`)
	parallelN(b, 32, n, func(i int) error {
		mr := k.mr(f.ns(i), fmt.Sprintf("floor-%d", i), i, f)
		floorWrites.Add(1)
		return raw.Status().Patch(ctx, mr, client.RawPatch(types.MergePatchType, status))
	})
	if err := <-floorSeen; err != nil {
		b.Fatal(err)
	}
	r.FloorSeconds = time.Since(start).Seconds()
	r.FloorCPU = cpuSince(cpu)
	r.FloorWritesPerMR = float64(floorWrites.Load()) / float64(n)
	b.StopTimer()
	phase("floor")
	// One by one: a delete-collection of 10,000 outlives the request.
	parallel(b, n, func(i int) error {
		return client.IgnoreNotFound(c.Delete(ctx, k.mr(f.ns(i), fmt.Sprintf("floor-%d", i), i, f)))
	})
	phase("floor clean-up")
	quiesce(ctx, b)
	phase("controllers after floor")

	// The provider: the probes converge first, then the fleet is applied
	// and the probes' changes are timed while it converges.
	if prov, err = startProvider(ctx, prov.bin, prov.kubeconfig, prov.rate); err != nil {
		b.Fatal(err)
	}
	probe := func(j int) string { return fmt.Sprintf("probe-%d", j) }
	for j := range fleetProbes {
		if err := c.Create(ctx, k.mr(f.ns(j), probe(j), n+j, f)); err != nil {
			b.Fatal(err)
		}
	}
	if err := awaitReady(ctx, anyNS, fleetProbes, 5*time.Minute, k.list()); err != nil {
		b.Fatal(err)
	}
	base, err := fleetSample(ctx)
	if err != nil {
		b.Fatal(err)
	}
	r.BaseHeap, r.BaseRSS, r.BaseGoroutines = base.heap, base.rss, base.goroutines
	apiWatchers := func() float64 {
		m, err := apiserverMetrics(ctx)
		if err != nil {
			return 0
		}
		return m.sum("apiserver_longrunning_requests", map[string]string{"verb": "WATCH"})
	}
	watchersBefore := apiWatchers()
	phase("provider start and probes")

	converged := make(chan struct{})
	var during []float64
	var probing sync.WaitGroup
	probing.Add(1)
	go func() {
		defer probing.Done()
		// Paced: back to back, the probes' own changes (each AppBundle
		// probe rolls a Deployment out twice) were as much work for the
		// control plane as the fleet, work the floor never had.
		pace := time.NewTicker(probePace)
		defer pace.Stop()
		for j := 0; ; j = (j + 1) % fleetProbes {
			select {
			case <-converged:
				return
			case <-pace.C:
			}
			if d, err := react(ctx, k, f, probe(j), n+j); err == nil {
				during = append(during, d)
			} else {
				b.Log("probe:", err)
			}
		}
	}()
	profiled := make(chan error, 1)
	b.StartTimer()
	cpu = cpuSeconds()
	start = time.Now()
	if profileDir != "" {
		if err := <-apiProfiled; err != nil {
			b.Log("profile:", err)
		}
		go func() {
			profiled <- prov.profile("profile", fmt.Sprintf("seconds=%d", profileSeconds), profilePath("cpu"))
		}()
		go func() { apiProfiled <- apiserverProfile(ctx, profileSeconds, profilePath("apiserver")) }()
	}
	parallel(b, n, func(i int) error {
		return c.Create(ctx, k.mr(f.ns(i), fmt.Sprintf("mr-%d", i), i, f))
	})
	if err := awaitReady(ctx, anyNS, n+fleetProbes, 60*time.Minute, k.list()); err != nil {
		b.Fatal(err)
	}
	r.Seconds = time.Since(start).Seconds()
	r.CPU, r.Cores = cpuSince(cpu), runtime.NumCPU()
	b.StopTimer()
	phase("converge")
	close(converged)
	probing.Wait()
	r.DuringMs = during
	if m, err := fleetScrape(); err == nil {
		r.Urgent = urgentBetween(base, m)
	}
	if profileDir != "" {
		if err := <-profiled; err != nil {
			b.Log("profile:", err)
		}
		if err := <-apiProfiled; err != nil {
			b.Log("profile:", err)
		}
		if err := prov.profile("heap", "gc=1", profilePath("heap")); err != nil {
			b.Log("profile:", err)
		}
	}

	if _, err := quietCountsPolling(ctx, n+fleetProbes); err != nil {
		b.Fatal(err)
	}
	after, err := fleetSample(ctx)
	if err != nil {
		b.Fatal(err)
	}
	mrs := float64(n + fleetProbes)
	r.Heap, r.RSS, r.Goroutines = after.heap, after.rss, after.goroutines
	r.Watches = after.watches
	r.APIServerWatchersDelta = apiWatchers() - watchersBefore
	for j := range fleetProbes {
		d, err := react(ctx, k, f, probe(j), n+j)
		if err != nil {
			b.Fatal(err)
		}
		r.AfterMs = append(r.AfterMs, d)
	}
	if _, err := quietCountsPolling(ctx, n+fleetProbes); err != nil {
		b.Fatal(err)
	}
	probed, err := fleetScrape()
	if err != nil {
		b.Fatal(err)
	}
	// What converging the fleet cost: the probes were converged before the
	// base sample, but their reactions while the fleet converged are in the
	// count. Each such reaction is charged what one cost once the fleet was
	// idle (the mean of the ten after it), and the rest is divided among the
	// fleet's n resources.
	r.DuringReactions = float64(len(during))
	r.ProbeReconciles = (probed.reconciles - after.reconciles) / fleetProbes
	r.ProbeRequests = (probed.total() - after.total()) / fleetProbes
	r.ProbeWrites = (probed.writes() - after.writes()) / fleetProbes
	fleetOnly := func(converge, probes float64) float64 {
		return max(0, converge-r.DuringReactions*probes) / float64(n)
	}
	r.ReconcilesPerMR = fleetOnly(after.reconciles-base.reconciles, r.ProbeReconciles)
	r.RequestsPerMR = fleetOnly(after.total()-base.total(), r.ProbeRequests)
	r.WritesPerMR = fleetOnly(after.writes()-base.writes(), r.ProbeWrites)
	r.Requests, r.ReconcilesBy = map[string]float64{}, map[string]float64{}
	for k, v := range after.reconcilesBy {
		if d := fleetOnly(v-base.reconcilesBy[k], (probed.reconcilesBy[k]-v)/fleetProbes); d > 0 {
			r.ReconcilesBy[k] = d
		}
	}
	for vr, v := range after.requests {
		if d := fleetOnly(v-base.requests[vr], (probed.requests[vr]-v)/fleetProbes); d > 0 {
			r.Requests[vr] = d
		}
	}

	phase("idle and probes after")
	// A restart with the converged fleet: what the new provider sends until
	// it has reconciled every resource once and its queues are empty.
	prov.stop()
	start = time.Now()
	if prov, err = startProvider(ctx, prov.bin, prov.kubeconfig, prov.rate); err != nil {
		b.Fatal(err)
	}
	var last fleetMetrics
	quiet := 0
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := fleetScrape()
		if err != nil {
			return false, nil //nolint:nilerr // Try again.
		}
		if s.reconciles >= mrs && s.depth == 0 && s.total() == last.total() {
			quiet++
		} else {
			quiet = 0
		}
		last = s
		return quiet >= 4, nil // A second without a request.
	})
	r.RestartSeconds = time.Since(start).Seconds() - 1
	if err != nil {
		// What the scenario measured before still counts: recorded, and the
		// run fails after.
		b.Errorf("the restarted provider did not become idle: %v", err)
		r.RestartNotIdle, r.RestartSeconds = true, time.Since(start).Seconds()
	}
	r.RestartRequests, r.RestartWrites, r.RestartRequestsBy = last.total(), last.writes(), last.requests

	phase("restart")
	r.WallSeconds = time.Since(began).Seconds()
	b.ReportMetric(r.Seconds, "s-converge")
	b.ReportMetric(r.FloorSeconds, "s-floor")
	b.ReportMetric(r.ReconcilesPerMR, "reconciles/MR")
	b.ReportMetric(r.RequestsPerMR, "requests/MR")
	if err := writeFleetResult(r); err != nil {
		b.Fatal(err)
	}
	if !disposable() {
		abandon(b, c, []client.ObjectList{k.list()}, f.nss)
	}
}

// probePace is the least time between two probes' changes while a fleet
// converges.
const probePace = 500 * time.Millisecond

// A probeCheck is where the provider acts on a probe's change: the object it
// writes (kind, namespace and name), and whether a version of it shows the
// action.
type probeCheck struct {
	obj   client.Object
	acted func(client.Object) bool
}

// react makes probe resource name's change and returns the milliseconds until
// the provider acted on it. It watches the object the provider writes rather
// than polling it: polls every 20 ms were 50 requests a second to an API
// server the fleet keeps busy, which the floor does not pay.
func react(ctx context.Context, k fleetKind, f *fleet, name string, i int) (float64, error) {
	start := time.Now()
	check, err := k.probe(ctx, env.Client, f.ns(i-f.n), name, i, f)
	if err != nil {
		return 0, err
	}
	if _, err := watchFor(ctx, check.obj, check.acted, 10*time.Minute); err != nil {
		return 0, fmt.Errorf("%s: no action: %w", name, err)
	}
	return float64(time.Since(start).Microseconds()) / 1000, nil
}

// watchFor watches obj until a version of it satisfies ok, or timeout (an
// error then). A watch starts with the object as it is, so a version
// written before it opened counts.
func watchFor(ctx context.Context, obj client.Object, ok func(client.Object) bool, timeout time.Duration) (bool, error) {
	gvk, err := apiutil.GVKForObject(obj, env.Scheme)
	if err != nil {
		return false, err
	}
	gvk.Kind += "List"
	l, err := env.Scheme.New(gvk)
	if err != nil {
		return false, err
	}
	wc, err := watchClient()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for ctx.Err() == nil {
		w, err := wc.Watch(ctx, l.(client.ObjectList), client.InNamespace(obj.GetNamespace()), client.MatchingFields{"metadata.name": obj.GetName()})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if o, isObj := ev.Object.(client.Object); isObj && ev.Type != watch.Deleted && ev.Type != watch.Error && ok(o) {
				w.Stop()
				return true, nil
			}
		}
		// The API server ended the watch: open it again.
		w.Stop()
	}
	return false, ctx.Err()
}

var (
	watchClientOnce sync.Once
	sharedWatch     client.WithWatch
	errWatchClient  error
)

// watchClient is the bench's one client that watches.
func watchClient() (client.WithWatch, error) {
	watchClientOnce.Do(func() {
		sharedWatch, errWatchClient = client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	})
	return sharedWatch, errWatchClient
}

// fleetMetrics is one reading of the provider's metrics.
type fleetMetrics struct {
	heap, rss, goroutines, reconciles, watches, depth float64
	// fds are the provider's open files (connections included), failures
	// its reconciles that ended in an error.
	fds, failures float64
	requests      map[string]float64 // "verb resource"
	reconcilesBy  map[string]float64 // "controller result"
	// urgentWait and urgentReconcile are the provider's urgent-reaction histograms,
	// every controller's together.
	urgentWait, urgentReconcile histogram
}

// histogram is a Prometheus histogram's cumulative counts by upper bound.
type histogram map[float64]float64

func histogramOf(f families, name string) histogram {
	out := histogram{}
	mf, ok := f[name]
	if !ok {
		return out
	}
	for _, m := range mf.GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			// The text format lists +Inf as a bucket; the count stands for it.
			if !math.IsInf(b.GetUpperBound(), 1) {
				out[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		out[math.Inf(1)] += float64(m.GetHistogram().GetSampleCount())
	}
	return out
}

// since is what h counted after was.
func (h histogram) since(was histogram) histogram {
	out := histogram{}
	for le, n := range h {
		out[le] = n - was[le]
	}
	return out
}

func (h histogram) count() float64 { return h[math.Inf(1)] }

// quantile estimates the q-quantile in milliseconds, linearly within its
// bucket, as Prometheus' histogram_quantile does; the last finite bound when
// it lies beyond.
func (h histogram) quantile(q float64) float64 {
	les := slices.Sorted(maps.Keys(h))
	total := h.count()
	if total == 0 {
		return 0
	}
	rank, lower, below := q*total, 0.0, 0.0
	for _, le := range les {
		if h[le] >= rank {
			if math.IsInf(le, 1) {
				return lower * 1000
			}
			return (lower + (le-lower)*(rank-below)/max(h[le]-below, 1)) * 1000
		}
		lower, below = le, h[le]
	}
	return lower * 1000
}

// urgentTimes are quantiles of the provider's urgent reconciles, in ms.
type urgentTimes struct {
	Count                          float64
	WaitP50Ms, WaitP99Ms           float64
	ReconcileP50Ms, ReconcileP99Ms float64
}

func urgentBetween(was, is fleetMetrics) *urgentTimes {
	w, r := is.urgentWait.since(was.urgentWait), is.urgentReconcile.since(was.urgentReconcile)
	if w.count() == 0 {
		return nil
	}
	return &urgentTimes{Count: w.count(), WaitP50Ms: w.quantile(0.5), WaitP99Ms: w.quantile(0.99),
		ReconcileP50Ms: r.quantile(0.5), ReconcileP99Ms: r.quantile(0.99)}
}

func (m fleetMetrics) total() float64 {
	t := 0.0
	for _, v := range m.requests {
		t += v
	}
	return t
}

// work is total without the requests a replica sends while it does
// nothing: its Leases' renewals, every second or so per shard, and watches
// the API server ended and the replica opened again.
func (m fleetMetrics) work() float64 {
	t := 0.0
	for vr, v := range m.requests {
		verb, res, _ := strings.Cut(vr, " ")
		if res != "leases" && verb != "watch" {
			t += v
		}
	}
	return t
}

// leases is what total sent to Leases: the replicas' membership and shard
// renewals and their reads of each other's.
func (m fleetMetrics) leases() float64 {
	t := 0.0
	for vr, v := range m.requests {
		if _, res, _ := strings.Cut(vr, " "); res == "leases" {
			t += v
		}
	}
	return t
}

func (m fleetMetrics) writes() float64 {
	t := 0.0
	for vr, v := range m.requests {
		var verb, res string
		_, _ = fmt.Sscan(vr, &verb, &res)
		switch verb {
		case "create", "update", "patch", "delete", "deletecollection":
			t += v
		}
	}
	return t
}

// fleetScrape reads the provider's metrics without a garbage collection.
func fleetScrape() (fleetMetrics, error) { return scrapeOf(prov) }

// scrapeOf reads one provider process's metrics without a garbage collection.
func scrapeOf(p *providerProcess) (fleetMetrics, error) {
	m, err := p.providerMetrics()
	if err != nil {
		return fleetMetrics{}, err
	}
	out := fleetMetrics{
		goroutines:      m.sum("go_goroutines", nil),
		reconciles:      m.sum("controller_runtime_reconcile_total", nil),
		watches:         m.sum("clusterops_api_watches", nil),
		depth:           m.sum("workqueue_depth", nil),
		heap:            m.sum("go_memstats_heap_alloc_bytes", nil),
		fds:             m.sum("process_open_fds", nil),
		failures:        m.sum("controller_runtime_reconcile_errors_total", nil),
		requests:        map[string]float64{},
		reconcilesBy:    map[string]float64{},
		urgentWait:      histogramOf(m, "clusterops_urgent_wait_seconds"),
		urgentReconcile: histogramOf(m, "clusterops_urgent_reconcile_seconds"),
	}
	if mf, ok := m["controller_runtime_reconcile_total"]; ok {
		for _, s := range mf.GetMetric() {
			var c, res string
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case "controller":
					c = l.GetValue()
				case "result":
					res = l.GetValue()
				}
			}
			out.reconcilesBy[c+" "+res] += s.GetCounter().GetValue()
		}
	}
	if mf, ok := m["clusterops_api_requests_total"]; ok {
		for _, s := range mf.GetMetric() {
			var verb, res string
			for _, l := range s.GetLabel() {
				switch l.GetName() {
				case "verb":
					verb = l.GetValue()
				case "resource":
					res = l.GetValue()
				}
			}
			out.requests[verb+" "+res] += s.GetCounter().GetValue()
		}
	}
	return out, nil
}

// fleetSample reads the provider's metrics after a garbage collection, with
// its resident set.
func fleetSample(ctx context.Context) (fleetMetrics, error) { return sampleOf(ctx, prov) }

// sampleOf is fleetSample of one provider process.
func sampleOf(_ context.Context, p *providerProcess) (fleetMetrics, error) {
	if err := p.collectGarbage(); err != nil {
		return fleetMetrics{}, err
	}
	m, err := scrapeOf(p)
	if err != nil {
		return m, err
	}
	m.rss, err = p.rssBytes()
	return m, err
}

func writeFleetResult(r fleetResult) error {
	dir := os.Getenv("FLEET_OUT")
	if dir == "" {
		dir = filepath.Join(os.Getenv("BENCH_OUT"), "fleet")
	}
	r.Commit = os.Getenv("BENCH_COMMIT")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s-%d.json", r.Kind, r.Layout, r.N)), b, 0o644)
}

// configRolloutKind rolls Deployment web-i when ConfigMap conf-i changes: named
// by each rollout, or found by auto (every rollout then picks its workload out
// of all the namespace's).
func configRolloutKind(auto bool) fleetKind {
	return fleetKind{
		list: func() client.ObjectList { return &workloadv1alpha1.ConfigRolloutList{} },
		prereqs: func(ns string, i int) []client.Object {
			zero := int32(0)
			cm := fmt.Sprintf("conf-%d", i)
			// The Deployments are created as users' are, with no hash in
			// their pod templates: neither phase writes to them (a rollout
			// follows its Deployment with a baseline in its own status);
			// only the probes' changes roll theirs. No history
			// (RevisionHistoryLimit 0): the controller-manager deletes a
			// rollout's old ReplicaSet. When the floor and the provider
			// still rolled every Deployment, the default left a second, and
			// in one namespace the Deployment controller, which lists all of
			// them for each Deployment it syncs, took twice the floor's CPU.
			return []client.Object{
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: ns}, Data: map[string]string{"k": "v"}},
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: ns}, Spec: appsv1.DeploymentSpec{
					Replicas:             &zero,
					RevisionHistoryLimit: &zero,
					Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"app": cm}},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": cm}},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx",
							EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}},
					},
				}},
			}
		},
		mr: func(ns, name string, i int, _ *fleet) client.Object {
			p := workloadv1alpha1.ConfigRolloutParameters{ConfigMaps: []workloadv1alpha1.SourceRef{{Name: fmt.Sprintf("conf-%d", i)}},
				// A probe's source changes every 5 s while the fleet converges:
				// the default rollout limit (5 within 10m) would hold it back.
				RolloutLimit: &workloadv1alpha1.RolloutLimit{Rollouts: 1000, Within: &metav1.Duration{Duration: 10 * time.Second}}}
			if auto {
				p.Auto = true
			} else {
				p.Workloads = []workloadv1alpha1.WorkloadRef{{Kind: "Deployment", Name: fmt.Sprintf("web-%d", i)}}
			}
			return &workloadv1alpha1.ConfigRollout{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: workloadv1alpha1.ConfigRolloutSpec{ForProvider: p}}
		},
		floor: func(context.Context, client.Client, string, string, int, *fleet) (int, error) {
			// A rollout starts to follow its Deployment without writing to
			// it: its baseline goes into the rollout's own status, which the
			// floor's status write stands for.
			return 0, nil
		},
		probe: func(ctx context.Context, c client.Client, ns, _ string, i int, _ *fleet) (probeCheck, error) {
			d := &appsv1.Deployment{}
			key := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("web-%d", i)}
			if err := c.Get(ctx, key, d); err != nil {
				return probeCheck{}, err
			}
			// The probe's first change rolls the Deployment from its
			// baseline, a later one from the hash the one before wrote.
			was := d.Spec.Template.Annotations[configrollout.AnnotationHash]
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("conf-%d", i), Namespace: ns}}
			if err := c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"`+strconv.FormatInt(time.Now().UnixNano(), 10)+`"}}`))); err != nil {
				return probeCheck{}, err
			}
			return probeCheck{d, func(o client.Object) bool {
				return o.(*appsv1.Deployment).Spec.Template.Annotations[configrollout.AnnotationHash] != was
			}}, nil
		},
	}
}

// quiesce waits until the control plane has caught up: until the API server
// took at most quietWrites writes in each of two seconds in a row (lease
// renewals and heartbeats go on), or quiesceTimeout passed. At 10,000
// Deployments the controller-manager's backlog (a ReplicaSet and two status
// writes for each) takes minutes.
func quiesce(ctx context.Context, b *testing.B) {
	b.Helper()
	writes := func() (float64, bool) {
		m, err := apiserverMetrics(ctx)
		if err != nil {
			return 0, false
		}
		all := m.sum("apiserver_request_total", nil)
		for _, read := range []string{"GET", "LIST", "WATCH"} {
			all -= m.sum("apiserver_request_total", map[string]string{"verb": read})
		}
		return all, true
	}
	start := time.Now()
	last, _ := writes()
	quiet, rate := 0, 0.0
	for quiet < 2 && time.Since(start) < quiesceTimeout {
		time.Sleep(time.Second)
		now, ok := writes()
		rate = now - last
		if ok && rate <= quietWrites {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
	b.Logf("control plane quiet after %.1f s (%d: %.0f writes in the last second)", time.Since(start).Seconds(), quiet, rate)
}

const (
	quietWrites    = 10
	quiesceTimeout = 10 * time.Minute
)
