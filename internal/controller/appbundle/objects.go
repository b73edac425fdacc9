package appbundle

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownership"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// LabelOwner names the AppBundle that owns a Deployment, claim or Service. The
// provider caches and watches only objects that carry it.
const LabelOwner = "workload.clusterops.io/appbundle"

// bundleMark marks an object as made for (or adopted by) the AppBundle of its
// label's name.
var bundleMark = ownership.ByName(LabelOwner)

// FieldManager is the server-side apply field manager of the provider: fields
// others own are left alone.
const FieldManager = "provider-clusterops"

// labelManagedBy is the well-known label that says which tool manages an
// object; the provider sets it, with LabelOwner, on everything it makes.
const labelManagedBy = ownership.LabelManagedBy

const (
	containerName = "app"
	volumeName    = "data"
)

// PVCName is the name of an AppBundle's data claim.
func PVCName(ab *v1alpha1.AppBundle) string { return ab.GetName() + "-data" }

func labels(ab *v1alpha1.AppBundle) map[string]string {
	return map[string]string{bundleMark.Key: bundleMark.Value(ab), labelManagedBy: ownership.ManagedBy}
}

// objectLabels are the labels of the objects an AppBundle makes: its pods'
// and, on a sharded provider, its shard, so that the replica acting on the
// bundle watches them. Never in the pod template: a bundle moved to another
// shard must not restart its pods.
func objectLabels(ab *v1alpha1.AppBundle) map[string]string {
	return shard.Carry(labels(ab), ab.GetLabels())
}

// selector selects the AppBundle's pods; it must never change, as a
// Deployment's selector is immutable.
func selector(ab *v1alpha1.AppBundle) map[string]string {
	return map[string]string{LabelOwner: ab.GetName()}
}

// ownerReference makes the AppBundle the controller of an object, so that the
// object is garbage collected with it.
func ownerReference(ab *v1alpha1.AppBundle) *metav1ac.OwnerReferenceApplyConfiguration {
	gvk := v1alpha1.AppBundleGroupVersionKind
	return metav1ac.OwnerReference().
		WithAPIVersion(gvk.GroupVersion().String()).WithKind(gvk.Kind).
		WithName(ab.GetName()).WithUID(ab.GetUID()).
		WithController(true).WithBlockOwnerDeletion(true)
}

func storageSize(ab *v1alpha1.AppBundle) resource.Quantity {
	if s := ab.Spec.ForProvider.Storage.Size; s != nil {
		return *s
	}
	return resource.MustParse("1Gi")
}

func accessModes(ab *v1alpha1.AppBundle) []corev1.PersistentVolumeAccessMode {
	if m := ab.Spec.ForProvider.Storage.AccessModes; len(m) > 0 {
		return m
	}
	return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
}

func mountPath(ab *v1alpha1.AppBundle) string {
	if p := ab.Spec.ForProvider.Storage.MountPath; p != "" {
		return p
	}
	return "/data"
}

func wantsService(ab *v1alpha1.AppBundle) bool {
	t := ab.Spec.ForProvider.Service
	return t != "" && t != v1alpha1.ServiceNone && ab.Spec.ForProvider.Port != nil
}

// desiredPVC is the data claim. It is owned by the AppBundle (and so garbage
// collected with it) only under the Delete policy: under Retain the data must
// outlive the AppBundle.
func desiredPVC(ab *v1alpha1.AppBundle, local bool) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	p := ab.Spec.ForProvider
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(accessModes(ab)...).
		WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: storageSize(ab)}))
	if p.Storage.StorageClassName != nil {
		spec.WithStorageClassName(*p.Storage.StorageClassName)
	}
	c := corev1ac.PersistentVolumeClaim(PVCName(ab), ab.GetNamespace()).WithLabels(objectLabels(ab)).WithSpec(spec)
	if local && p.PVCDeletionPolicy == v1alpha1.PVCDelete {
		c.WithOwnerReferences(ownerReference(ab))
	}
	return c
}

// desiredDeployment runs the image with the claim mounted. The variables and
// resources come from the AppBundle as the API types have them, and are
// converted as they are: every field of theirs is applied.
func desiredDeployment(ab *v1alpha1.AppBundle, local bool) (*appsv1ac.DeploymentApplyConfiguration, error) {
	p := ab.Spec.ForProvider
	c := corev1ac.Container().WithName(containerName).WithImage(p.Image).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(volumeName).WithMountPath(mountPath(ab)))
	if len(p.Env) > 0 {
		if err := convert(storedEnv(p.Env), &c.Env); err != nil {
			return nil, errors.Wrap(err, "cannot convert spec.forProvider.env")
		}
	}
	if p.Resources != nil {
		c.Resources = &corev1ac.ResourceRequirementsApplyConfiguration{}
		if err := convert(p.Resources, c.Resources); err != nil {
			return nil, errors.Wrap(err, "cannot convert spec.forProvider.resources")
		}
	}
	if p.Port != nil {
		c.WithPorts(corev1ac.ContainerPort().WithName("app").WithContainerPort(*p.Port).WithProtocol(corev1.ProtocolTCP))
	}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector(ab))).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(labels(ab)).
			WithSpec(corev1ac.PodSpec().
				WithContainers(c).
				WithVolumes(corev1ac.Volume().WithName(volumeName).
					WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().WithClaimName(PVCName(ab))))))
	if p.Replicas != nil {
		spec.WithReplicas(*p.Replicas)
	}
	// A ReadWriteOnce claim cannot be mounted by a new pod on another node
	// while the old pod still holds it: replace pods instead of rolling them.
	if recreate(ab) {
		spec.WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType))
	}
	d := appsv1ac.Deployment(ab.GetName(), ab.GetNamespace()).WithLabels(objectLabels(ab)).WithSpec(spec)
	if local {
		d.WithOwnerReferences(ownerReference(ab))
	}
	return d, nil
}

// storedEnv is env with the values the API server defaults inside a fieldRef
// or fileKeyRef set. Each is atomic: the provider owns it whole, defaults
// included, so what it owns would differ from what it applied forever (a
// write on every reconcile) unless it applies them as stored.
func storedEnv(env []corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, len(env))
	for i, e := range env {
		out[i] = e
		s := e.ValueFrom
		if s == nil || (s.FieldRef == nil || s.FieldRef.APIVersion != "") && (s.FileKeyRef == nil || s.FileKeyRef.Optional != nil) {
			continue
		}
		s = s.DeepCopy()
		if s.FieldRef != nil && s.FieldRef.APIVersion == "" {
			s.FieldRef.APIVersion = "v1"
		}
		if s.FileKeyRef != nil && s.FileKeyRef.Optional == nil {
			s.FileKeyRef.Optional = ptr.To(false)
		}
		out[i].ValueFrom = s
	}
	return out
}

// recreate is whether the AppBundle's Deployment replaces its pods rather
// than rolling them: its claim can be mounted on one node only.
func recreate(ab *v1alpha1.AppBundle) bool {
	for _, m := range accessModes(ab) {
		if m == corev1.ReadWriteOnce || m == corev1.ReadWriteOncePod {
			return true
		}
	}
	return false
}

// desiredService exposes the port, or is nil when no Service is wanted.
func desiredService(ab *v1alpha1.AppBundle, local bool) *corev1ac.ServiceApplyConfiguration {
	if !wantsService(ab) {
		return nil
	}
	port := *ab.Spec.ForProvider.Port
	s := corev1ac.Service(ab.GetName(), ab.GetNamespace()).WithLabels(objectLabels(ab)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceType(ab.Spec.ForProvider.Service)).
			WithSelector(selector(ab)).
			WithPorts(corev1ac.ServicePort().WithName("app").WithPort(port).WithTargetPort(intstr.FromInt32(port)).WithProtocol(corev1.ProtocolTCP)))
	if local {
		s.WithOwnerReferences(ownerReference(ab))
	}
	return s
}
