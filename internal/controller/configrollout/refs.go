// Package configrollout is the logic of the ConfigRollout kind, which rolls
// workloads when the ConfigMaps and Secrets they use change by writing a hash
// of that content into their pod templates. So far it holds the pure part:
// which sources a pod template uses (refs.go), and what their content hashes
// to (hash.go); the kind's API and controller build on it.
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

// References finds every ConfigMap and Secret a pod spec uses: through volumes
// (including projected ones), envFrom and env valueFrom, in containers, init
// containers and ephemeral containers. Image pull secrets are not content the
// workload reads, so they do not count.
func References(spec *corev1.PodSpec) Refs {
	r := Refs{ConfigMaps: sets.New[string](), Secrets: sets.New[string]()}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			r.ConfigMaps.Insert(v.ConfigMap.Name)
		case v.Secret != nil:
			r.Secrets.Insert(v.Secret.SecretName)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					r.ConfigMaps.Insert(s.ConfigMap.Name)
				}
				if s.Secret != nil {
					r.Secrets.Insert(s.Secret.Name)
				}
			}
		}
	}
	envs := func(from []corev1.EnvFromSource, env []corev1.EnvVar) {
		for _, f := range from {
			if f.ConfigMapRef != nil {
				r.ConfigMaps.Insert(f.ConfigMapRef.Name)
			}
			if f.SecretRef != nil {
				r.Secrets.Insert(f.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			if k := e.ValueFrom.ConfigMapKeyRef; k != nil {
				r.ConfigMaps.Insert(k.Name)
			}
			if k := e.ValueFrom.SecretKeyRef; k != nil {
				r.Secrets.Insert(k.Name)
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
	r.ConfigMaps.Delete("")
	r.Secrets.Delete("")
	return r
}

// UsesAny reports whether the pod spec uses any of the given sources.
func UsesAny(spec *corev1.PodSpec, configMaps, secrets []string) bool {
	r := References(spec)
	return r.ConfigMaps.HasAny(configMaps...) || r.Secrets.HasAny(secrets...)
}
