// Package configrollout is the logic of the ConfigRollout kind, which rolls
// workloads when the ConfigMaps and Secrets they use change by writing a hash
// of that content into their pod templates: which sources, and which of their
// keys, a pod template reads (refs.go), what that content hashes to (hash.go),
// which workloads a rollout selects (workloads.go), which rollouts a workload
// event concerns (enqueue.go), and the controller (configrollout.go).
package configrollout

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Refs are the names of the ConfigMaps and Secrets a pod template uses.
type Refs struct {
	ConfigMaps sets.Set[string]
	Secrets    sets.Set[string]
}

// A Use is how a pod template reads one source: all of it (envFrom, a volume
// without items), or only some of its keys (env valueFrom, volume items).
type Use struct {
	// Whole is true when any key of the source reaches the pods.
	Whole bool
	// Keys are the keys read one by one; they do not matter when Whole.
	Keys sets.Set[string]
}

// Uses are the sources a pod template reads, by name, and how.
type Uses struct {
	ConfigMaps map[string]Use
	Secrets    map[string]Use
}

// read records a use of source name: of the given keys, or of all of it when
// keys is empty.
func read(m map[string]Use, name string, keys ...string) {
	if name == "" {
		return
	}
	u, ok := m[name]
	if !ok {
		u = Use{Keys: sets.New[string]()}
	}
	if len(keys) == 0 {
		u.Whole = true
	}
	u.Keys.Insert(keys...)
	m[name] = u
}

// itemKeys are the keys volume items read: none, meaning the whole source,
// when there are no items, or when one names no key (which the API server
// refuses), to be safe.
func itemKeys(items []corev1.KeyToPath) []string {
	out := make([]string, 0, len(items))
	for _, i := range items {
		if i.Key == "" {
			return nil
		}
		out = append(out, i.Key)
	}
	return out
}

// KeysRead finds every ConfigMap and Secret a pod spec reads, and which of
// their keys: through volumes (including projected ones; items name keys),
// envFrom (all keys) and env valueFrom (one key), in containers, init
// containers and ephemeral containers. Image pull secrets are not content the
// workload reads, so they do not count. An empty key counts as reading the
// whole source (see itemKeys).
func KeysRead(spec *corev1.PodSpec) Uses {
	u := Uses{ConfigMaps: map[string]Use{}, Secrets: map[string]Use{}}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			read(u.ConfigMaps, v.ConfigMap.Name, itemKeys(v.ConfigMap.Items)...)
		case v.Secret != nil:
			read(u.Secrets, v.Secret.SecretName, itemKeys(v.Secret.Items)...)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					read(u.ConfigMaps, s.ConfigMap.Name, itemKeys(s.ConfigMap.Items)...)
				}
				if s.Secret != nil {
					read(u.Secrets, s.Secret.Name, itemKeys(s.Secret.Items)...)
				}
			}
		}
	}
	envs := func(from []corev1.EnvFromSource, env []corev1.EnvVar) {
		for _, f := range from {
			if f.ConfigMapRef != nil {
				read(u.ConfigMaps, f.ConfigMapRef.Name)
			}
			if f.SecretRef != nil {
				read(u.Secrets, f.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			// An empty key (refused by the API server) reads nothing that we
			// could name: the whole source counts, to be safe.
			if k := e.ValueFrom.ConfigMapKeyRef; k != nil {
				read(u.ConfigMaps, k.Name, nonEmpty(k.Key)...)
			}
			if k := e.ValueFrom.SecretKeyRef; k != nil {
				read(u.Secrets, k.Name, nonEmpty(k.Key)...)
			}
		}
	}
	for _, c := range spec.InitContainers {
		envs(c.EnvFrom, c.Env)
	}
	for _, c := range spec.Containers {
		envs(c.EnvFrom, c.Env)
	}
	for _, c := range spec.EphemeralContainers {
		envs(c.EnvFrom, c.Env)
	}
	return u
}

func nonEmpty(k string) []string {
	if k == "" {
		return nil
	}
	return []string{k}
}

// References finds every ConfigMap and Secret a pod spec uses, in any of the
// ways KeysRead knows.
func References(spec *corev1.PodSpec) Refs {
	u := KeysRead(spec)
	r := Refs{ConfigMaps: sets.New[string](), Secrets: sets.New[string]()}
	for n := range u.ConfigMaps {
		r.ConfigMaps.Insert(n)
	}
	for n := range u.Secrets {
		r.Secrets.Insert(n)
	}
	return r
}

// UsesAny reports whether the pod spec uses any of the given sources.
func UsesAny(spec *corev1.PodSpec, configMaps, secrets []string) bool {
	r := References(spec)
	return r.ConfigMaps.HasAny(configMaps...) || r.Secrets.HasAny(secrets...)
}
