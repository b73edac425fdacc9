//go:build e2e

package crossplane

import (
	"context"
	"fmt"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pkgv1 "github.com/crossplane/crossplane/apis/v2/pkg/v1"
)

// externalRuntime plays the part Crossplane leaves to someone else under the External package
// runtime: for each active revision of a package it knows, it runs the package's binary on the
// host and reports the revision's runtime in its status (TLS Secret, function endpoint, health).
// When a revision turns inactive (an upgrade), its process stops, as its Deployment would.
type externalRuntime struct {
	c                       client.Client
	logs, kubeconfig, certs string
	byImage                 map[string]pkg
	mu                      sync.Mutex
	procs                   map[string]*revisionProcess // By revision name.
	external                map[string]bool             // Revision kinds the suite is the runtime of; core's Deployment runtime has the others.
	activated               map[string]bool             // Provider revisions whose runtime has run: as core's, a one-way latch.
	stopped                 chan struct{}
	cancel                  context.CancelFunc
}

type revisionProcess struct {
	kind    string // ProviderRevision or FunctionRevision.
	proc    *process
	port    int    // The function's gRPC port or the provider's health port.
	metrics int    // The provider's metrics port.
	health  string // A URL answering 200 when ready; empty for functions (a TCP dial).
	// replicas are the provider's other replicas, as many more as its runtime config's
	// Deployment template asks for; each runs with the config's arguments.
	replicas []*revisionProcess
}

// all is the revision's processes: the first, then its other replicas.
func (p *revisionProcess) all() []*revisionProcess {
	return append([]*revisionProcess{p}, p.replicas...)
}

// stopAll stops every replica of the revision.
func (p *revisionProcess) stopAll() {
	for _, q := range p.all() {
		q.proc.stop()
	}
}

// runningAll reports whether every replica of the revision runs.
func (p *revisionProcess) runningAll() bool {
	for _, q := range p.all() {
		if !q.proc.running() {
			return false
		}
	}
	return true
}

var revisionKinds = []string{"ProviderRevision", "FunctionRevision"}

func (r *externalRuntime) run(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.stopped = make(chan struct{})
	go func() {
		defer close(r.stopped)
		for {
			for _, k := range revisionKinds {
				// A conflict is core writing the same status: the next pass reads it afresh.
				if err := r.reconcile(ctx, k); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
					log.Printf("external runtime: %s: %v", k, err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
}

// stop stops the loop and every process it runs.
func (r *externalRuntime) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.stopped
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, p := range r.procs {
		p.stopAll()
		delete(r.procs, n)
	}
}

// provider returns the process the runtime runs for a provider revision, if it runs one.
func (r *externalRuntime) provider(revision string) (*revisionProcess, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.procs[revision]
	if !ok || !p.proc.running() {
		return nil, false
	}
	return p, true
}

// setExternal says whether the suite is the runtime of revisions of the kind, or core's
// Deployment runtime is (then the suite's processes keep running, but core reports the status).
func (r *externalRuntime) setExternal(kind string, v bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.external[kind] = v
}

func (r *externalRuntime) reconcile(ctx context.Context, kind string) error {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(pkgv1.SchemeGroupVersion.WithKind(kind + "List"))
	if err := r.c.List(ctx, l); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	// Stop inactive revisions first, so an upgrade never runs two providers at once.
	for i := range l.Items {
		rev := &l.Items[i]
		state, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState")
		if p, ok := r.procs[rev.GetName()]; ok && state != string(pkgv1.PackageRevisionActive) {
			p.stopAll()
			delete(r.procs, rev.GetName())
		}
	}
	for i := range l.Items {
		rev := &l.Items[i]
		seen[rev.GetName()] = true
		image, _, _ := unstructured.NestedString(rev.Object, "spec", "image")
		state, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState")
		pk, known := r.byImage[image]
		if !known || state != string(pkgv1.PackageRevisionActive) {
			continue
		}
		if kind == "ProviderRevision" && !r.activated[rev.GetName()] {
			// Core creates a provider's runtime once the revision is healthy (its
			// objects, the ManagedResourceDefinitions among them, established),
			// scaled to zero while it awaits activation.
			healthy, _ := condition(rev, string(pkgv1.TypeRevisionHealthy))
			awaiting, err := r.awaitingActivation(ctx, rev)
			if err != nil {
				return err
			}
			if healthy != "True" || awaiting {
				if err := r.reportScaledToZero(ctx, rev, awaiting); err != nil {
					return err
				}
				continue
			}
			r.activated[rev.GetName()] = true
		}
		rt, err := r.runtimeConfig(ctx, rev, kind)
		if err != nil {
			return err
		}
		p, err := r.ensure(rev.GetName(), kind, pk, rt)
		if err != nil {
			return err
		}
		if err := r.report(ctx, rev, kind, p); err != nil {
			return err
		}
	}
	for n, p := range r.procs {
		if !seen[n] && p.kind == kind {
			p.stopAll()
			delete(r.procs, n)
		}
	}
	return nil
}

// runtime is what a provider revision's runtime config asks of its Deployment: how many
// replicas, with which arguments.
type runtime struct {
	replicas int
	args     []string
}

// runtimeConfig reads a provider revision's DeploymentRuntimeConfig as core's Deployment runtime
// would apply it: the replicas of its Deployment template, and the arguments of its
// package-runtime container. Functions, and revisions without one, run one process.
func (r *externalRuntime) runtimeConfig(ctx context.Context, rev *unstructured.Unstructured, kind string) (runtime, error) {
	rt := runtime{replicas: 1}
	if kind != "ProviderRevision" {
		return rt, nil
	}
	name, err := r.runtimeConfigName(ctx, rev)
	if err != nil || name == "" {
		return rt, err
	}
	drc := &unstructured.Unstructured{}
	drc.SetGroupVersionKind(drcGVK)
	if err := r.c.Get(ctx, client.ObjectKey{Name: name}, drc); err != nil {
		return rt, client.IgnoreNotFound(err)
	}
	if n, ok, _ := unstructured.NestedInt64(drc.Object, "spec", "deploymentTemplate", "spec", "replicas"); ok && n > 0 {
		rt.replicas = int(n)
	}
	containers, _, _ := unstructured.NestedSlice(drc.Object, "spec", "deploymentTemplate", "spec", "template", "spec", "containers")
	for _, c := range containers {
		m, _ := c.(map[string]any)
		if m["name"] == "package-runtime" {
			rt.args, _, _ = unstructured.NestedStringSlice(m, "args")
		}
	}
	return rt, nil
}

// runtimeConfigName is the DeploymentRuntimeConfig core applies to a revision: that of the
// runtime ImageConfig whose longest prefix matches the revision's image, or the revision's own.
func (r *externalRuntime) runtimeConfigName(ctx context.Context, rev *unstructured.Unstructured) (string, error) {
	name, _, _ := unstructured.NestedString(rev.Object, "spec", "runtimeConfigRef", "name")
	image, _, _ := unstructured.NestedString(rev.Object, "spec", "image")
	resolved, _, _ := unstructured.NestedString(rev.Object, "status", "resolvedImage")
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(imageConfigGVK.GroupVersion().WithKind(imageConfigGVK.Kind + "List"))
	if err := r.c.List(ctx, l); err != nil {
		return "", err
	}
	longest := 0
	for _, ic := range l.Items {
		ref, ok, _ := unstructured.NestedString(ic.Object, "spec", "runtime", "configRef", "name")
		if !ok {
			continue
		}
		matches, _, _ := unstructured.NestedSlice(ic.Object, "spec", "matchImages")
		for _, m := range matches {
			prefix, _ := m.(map[string]any)["prefix"].(string)
			if len(prefix) > longest && (strings.HasPrefix(image, prefix) || strings.HasPrefix(resolved, prefix)) {
				name, longest = ref, len(prefix)
			}
		}
	}
	return name, nil
}

// ensure runs the revision's binary unless it already runs, as many replicas as rt asks for; a
// process that exited is started again, as a Deployment's pod would be.
func (r *externalRuntime) ensure(name, kind string, pk pkg, rt runtime) (*revisionProcess, error) {
	if p, ok := r.procs[name]; ok && p.runningAll() && len(p.all()) == rt.replicas {
		return p, nil
	}
	if p, ok := r.procs[name]; ok {
		p.stopAll()
		delete(r.procs, name)
	}
	log.Printf("external runtime: starting %s: %d replicas, arguments %v", name, rt.replicas, rt.args)
	var first *revisionProcess
	for i := range rt.replicas {
		p, err := r.startOne(name, i, kind, pk, rt.args)
		if err != nil {
			if first != nil {
				first.stopAll()
			}
			return nil, err
		}
		if first == nil {
			first = p
			continue
		}
		first.replicas = append(first.replicas, p)
	}
	r.procs[name] = first
	return first, nil
}

// startOne starts replica i of a revision's binary, with args added.
func (r *externalRuntime) startOne(name string, i int, kind string, pk pkg, extra []string) (*revisionProcess, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &revisionProcess{kind: kind, port: port}
	var args []string
	env := []string{"KUBECONFIG=" + r.kubeconfig}
	if kind == "FunctionRevision" {
		args = []string{"--address=127.0.0.1:" + strconv.Itoa(port), "--tls-certs-dir=" + r.certs, "--metrics-bind-address=0", "--debug"}
	} else {
		metrics, err := freePort()
		if err != nil {
			return nil, err
		}
		p.health = fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
		p.metrics = metrics
		args = []string{"--namespace=" + crossplaneNamespace, "--debug",
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(port)}
		env = append(env, "POD_NAMESPACE="+crossplaneNamespace)
	}
	logName := name
	if i > 0 {
		logName = fmt.Sprintf("%s-%d", name, i)
	}
	if p.proc, err = start(r.logs, logName, pk.binary, append(args, extra...), env...); err != nil {
		return nil, err
	}
	return p, nil
}

// report writes what the runtime knows into the revision's status, when it differs.
func (r *externalRuntime) report(ctx context.Context, rev *unstructured.Unstructured, kind string, p *revisionProcess) error {
	if !r.external[kind] {
		return nil
	}
	changed := false
	set := func(v string, path ...string) {
		if cur, _, _ := unstructured.NestedString(rev.Object, path...); cur != v {
			_ = unstructured.SetNestedField(rev.Object, v, path...)
			changed = true
		}
	}
	set(serverTLSSecret, "status", "tlsServerSecretName")
	if kind == "FunctionRevision" {
		set("127.0.0.1:"+strconv.Itoa(p.port), "status", "endpoint")
	}
	status := metav1.ConditionFalse
	if p.healthy(ctx) {
		status = metav1.ConditionTrue
	}
	if setCondition(rev, string(pkgv1.TypeRuntimeHealthy), string(status), string(pkgv1.ReasonHealthy)) {
		changed = true
	}
	if kind == "ProviderRevision" && setCondition(rev, string(pkgv1.TypeRuntimeActive), string(metav1.ConditionTrue), string(pkgv1.ReasonActiveRuntime)) {
		changed = true
	}
	if !changed {
		return nil
	}
	return client.IgnoreNotFound(r.c.Status().Update(ctx, rev))
}

// awaitingActivation reports whether a provider revision's runtime stays scaled to zero, as core's
// Deployment runtime decides it since v2.4: the package has the safe-start capability, none of the
// ManagedResourceDefinitions the revision owns is active, and its runtime has never run.
func (r *externalRuntime) awaitingActivation(ctx context.Context, rev *unstructured.Unstructured) (bool, error) {
	if r.activated[rev.GetName()] || !safeStart(rev) {
		return false, nil
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(mrdGVK.GroupVersion().WithKind(mrdGVK.Kind + "List"))
	if err := r.c.List(ctx, l); err != nil {
		return false, err
	}
	owned := false
	for i := range l.Items {
		mrd := &l.Items[i]
		if ref := metav1.GetControllerOf(mrd); ref == nil || ref.UID != rev.GetUID() {
			continue
		}
		owned = true
		if st, _, _ := unstructured.NestedString(mrd.Object, "spec", "state"); st == "Active" {
			return false, nil
		}
	}
	return owned, nil
}

// safeStart reports whether a revision's package declares the safe-start capability; core
// matches capabilities loosely (case and dashes aside).
func safeStart(rev *unstructured.Unstructured) bool {
	caps, _, _ := unstructured.NestedStringSlice(rev.Object, "status", "capabilities")
	for _, c := range caps {
		if strings.EqualFold(strings.ReplaceAll(c, "-", ""), "safestart") {
			return true
		}
	}
	return false
}

// reportScaledToZero reports a provider revision whose runtime does not run: its server TLS
// Secret, and, when it awaits activation, what core says of a runtime scaled to zero: healthy,
// awaiting activation.
func (r *externalRuntime) reportScaledToZero(ctx context.Context, rev *unstructured.Unstructured, awaiting bool) error {
	if !r.external["ProviderRevision"] {
		return nil
	}
	changed := false
	if cur, _, _ := unstructured.NestedString(rev.Object, "status", "tlsServerSecretName"); cur != serverTLSSecret {
		_ = unstructured.SetNestedField(rev.Object, serverTLSSecret, "status", "tlsServerSecretName")
		changed = true
	}
	if awaiting {
		a := setCondition(rev, string(pkgv1.TypeRuntimeHealthy), string(metav1.ConditionTrue), string(pkgv1.ReasonHealthy))
		b := setCondition(rev, string(pkgv1.TypeRuntimeActive), string(metav1.ConditionFalse), string(pkgv1.ReasonAwaitingActivation))
		changed = changed || a || b
	}
	if !changed {
		return nil
	}
	return client.IgnoreNotFound(r.c.Status().Update(ctx, rev))
}

func (p *revisionProcess) healthy(ctx context.Context) bool {
	if !p.proc.running() {
		return false
	}
	if p.health != "" {
		return httpOK(ctx, p.health)
	}
	c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(p.port))
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// setCondition sets a status condition of u and reports whether its status changed.
func setCondition(u *unstructured.Unstructured, typ, status, reason string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for i, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		if m["status"] == status {
			return false
		}
		m["status"], m["reason"], m["lastTransitionTime"] = status, reason, time.Now().UTC().Format(time.RFC3339)
		conds[i] = m
		_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
		return true
	}
	conds = append(conds, map[string]any{"type": typ, "status": status, "reason": reason, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
	return true
}
