package appbundle

import (
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func intOrString(p int32) intstr.IntOrString { return intstr.FromInt32(p) }

// deploymentDrifted reports whether the fields the AppBundle sets on its
// Deployment differ from what it wants. Fields it does not set (defaults, or
// fields owned by others) are not compared, so their values never cause a write.
func deploymentDrifted(want, got *appsv1.Deployment) bool {
	if want.Spec.Replicas != nil && (got.Spec.Replicas == nil || *got.Spec.Replicas != *want.Spec.Replicas) {
		return true
	}
	if !labelsContain(got.Labels, want.Labels) || !labelsContain(got.Spec.Template.Labels, want.Spec.Template.Labels) {
		return true
	}
	if want.Spec.Strategy.Type != "" && got.Spec.Strategy.Type != want.Spec.Strategy.Type {
		return true
	}
	wc, gc := want.Spec.Template.Spec.Containers[0], container(got, containerName)
	if gc == nil {
		return true
	}
	if gc.Image != wc.Image || envDrifted(wc.Env, gc.Env, ownedEnv(got)) ||
		!equality.Semantic.DeepEqual(gc.Resources, wc.Resources) || !portsMatch(wc.Ports, gc.Ports) {
		return true
	}
	if !mountsContain(gc.VolumeMounts, wc.VolumeMounts[0]) || !volumesContain(got.Spec.Template.Spec.Volumes, want.Spec.Template.Spec.Volumes[0]) {
		return true
	}
	return false
}

func container(d *appsv1.Deployment, name string) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

// envDrifted reports whether got lacks a variable the AppBundle sets, holds
// one with another value, or still holds one the AppBundle applied before
// (owned names it) but no longer sets. Variables others added are theirs:
// server-side apply leaves them in place, so counting them as drift would
// write on every reconcile and change nothing.
func envDrifted(want, got []corev1.EnvVar, owned map[string]bool) bool {
	have := make(map[string]corev1.EnvVar, len(got))
	for _, e := range got {
		have[e.Name] = e
	}
	wanted := make(map[string]bool, len(want))
	for _, w := range want {
		wanted[w.Name] = true
		if g, ok := have[w.Name]; !ok || !equality.Semantic.DeepEqual(g, defaulted(w)) {
			return true
		}
	}
	for n := range owned {
		if _, ok := have[n]; ok && !wanted[n] {
			return true
		}
	}
	return false
}

// defaulted is w as the API server stores it: a fieldRef without apiVersion
// gets v1, which is no drift.
func defaulted(w corev1.EnvVar) corev1.EnvVar {
	if w.ValueFrom != nil && w.ValueFrom.FieldRef != nil && w.ValueFrom.FieldRef.APIVersion == "" {
		w.ValueFrom = w.ValueFrom.DeepCopy()
		w.ValueFrom.FieldRef.APIVersion = "v1"
	}
	return w
}

// ownedEnv names the variables of the app container that the provider's
// field manager owns in d, as its managed fields record them.
func ownedEnv(d *appsv1.Deployment) map[string]bool {
	out := map[string]bool{}
	for _, m := range d.ManagedFields {
		if m.Manager != FieldManager || m.FieldsV1 == nil {
			continue
		}
		var f map[string]any
		if json.Unmarshal(m.FieldsV1.Raw, &f) != nil {
			continue
		}
		env := fieldsAt(f, "f:spec", "f:template", "f:spec", "f:containers", `k:{"name":"`+containerName+`"}`, "f:env")
		for k := range env {
			var key struct{ Name string }
			if rest, ok := strings.CutPrefix(k, "k:"); ok && json.Unmarshal([]byte(rest), &key) == nil && key.Name != "" {
				out[key.Name] = true
			}
		}
	}
	return out
}

// fieldsAt walks a managed fields set down path.
func fieldsAt(f map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := f[p].(map[string]any)
		if !ok {
			return nil
		}
		f = next
	}
	return f
}

func portsMatch(want, got []corev1.ContainerPort) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i].ContainerPort != got[i].ContainerPort || want[i].Name != got[i].Name {
			return false
		}
	}
	return true
}

func mountsContain(got []corev1.VolumeMount, want corev1.VolumeMount) bool {
	for _, m := range got {
		if m.Name == want.Name && m.MountPath == want.MountPath {
			return true
		}
	}
	return false
}

func volumesContain(got []corev1.Volume, want corev1.Volume) bool {
	for _, v := range got {
		if v.Name == want.Name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == want.PersistentVolumeClaim.ClaimName {
			return true
		}
	}
	return false
}

func labelsContain(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// serviceDrifted reports whether the Service's type, selector or port differ.
func serviceDrifted(want, got *corev1.Service) bool {
	if got.Spec.Type != want.Spec.Type || !equality.Semantic.DeepEqual(got.Spec.Selector, want.Spec.Selector) || !labelsContain(got.Labels, want.Labels) {
		return true
	}
	if len(got.Spec.Ports) != 1 {
		return true
	}
	w, g := want.Spec.Ports[0], got.Spec.Ports[0]
	return g.Port != w.Port || g.TargetPort != w.TargetPort || g.Name != w.Name
}

// A pvcChange is what may, and what may not, be done to bring an existing
// claim to what the AppBundle wants.
type pvcChange struct {
	// Apply is true when the claim should be written: its labels or owner
	// drifted, or it may grow.
	Apply bool
	// Refused says why a wanted change cannot be made; empty when none is refused.
	Refused string
}

// pvcDiff compares the claim with what the AppBundle wants. Access modes and
// storage class are immutable, and a claim can only grow, and only where its
// storage class allows expansion (expandable).
func pvcDiff(want, got *corev1.PersistentVolumeClaim, expandable bool) pvcChange {
	c := pvcChange{Apply: !labelsContain(got.Labels, want.Labels) || len(got.OwnerReferences) != len(want.OwnerReferences)}
	if !equality.Semantic.DeepEqual(got.Spec.AccessModes, want.Spec.AccessModes) {
		c.Refused = fmt.Sprintf("accessModes of PersistentVolumeClaim %q cannot change from %v to %v once it exists", got.Name, got.Spec.AccessModes, want.Spec.AccessModes)
		return c
	}
	if want.Spec.StorageClassName != nil && (got.Spec.StorageClassName == nil || *got.Spec.StorageClassName != *want.Spec.StorageClassName) {
		c.Refused = fmt.Sprintf("storageClassName of PersistentVolumeClaim %q cannot change once it exists", got.Name)
		return c
	}
	w, g := want.Spec.Resources.Requests[corev1.ResourceStorage], got.Spec.Resources.Requests[corev1.ResourceStorage]
	switch cmp := w.Cmp(g); {
	case cmp < 0:
		c.Refused = fmt.Sprintf("PersistentVolumeClaim %q cannot shrink from %s to %s", got.Name, g.String(), w.String())
	case cmp > 0 && !expandable:
		c.Refused = fmt.Sprintf("PersistentVolumeClaim %q cannot grow from %s to %s: its storage class does not allow volume expansion", got.Name, g.String(), w.String())
	case cmp > 0:
		c.Apply = true
	}
	return c
}
