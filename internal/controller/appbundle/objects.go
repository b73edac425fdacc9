package appbundle

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
)

// LabelOwner names the AppBundle that owns a Deployment, claim or Service. The
// provider caches and watches only objects that carry it.
const LabelOwner = "workload.clusterops.io/appbundle"

// FieldManager is the server-side apply field manager of the provider: fields
// others own are left alone.
const FieldManager = "provider-clusterops"

// labelManagedBy is the well-known label that says which tool manages an
// object; the provider sets it, with LabelOwner, on everything it makes.
const labelManagedBy = "app.kubernetes.io/managed-by"

const (
	containerName = "app"
	volumeName    = "data"
)

// PVCName is the name of an AppBundle's data claim.
func PVCName(ab *v1alpha1.AppBundle) string { return ab.GetName() + "-data" }

func labels(ab *v1alpha1.AppBundle) map[string]string {
	return map[string]string{LabelOwner: ab.GetName(), labelManagedBy: "provider-clusterops"}
}

// selector selects the AppBundle's pods; it must never change, as a
// Deployment's selector is immutable.
func selector(ab *v1alpha1.AppBundle) map[string]string {
	return map[string]string{LabelOwner: ab.GetName()}
}

func objectMeta(ab *v1alpha1.AppBundle, name string, ownerRef bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: ab.GetNamespace(), Labels: labels(ab)}
	if ownerRef {
		meta.AddOwnerReference(&m, meta.AsController(meta.TypedReferenceTo(ab, v1alpha1.AppBundleGroupVersionKind)))
	}
	return m
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
func desiredPVC(ab *v1alpha1.AppBundle, local bool) *corev1.PersistentVolumeClaim {
	p := ab.Spec.ForProvider
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: objectMeta(ab, PVCName(ab), local && p.PVCDeletionPolicy == v1alpha1.PVCDelete),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      accessModes(ab),
			StorageClassName: p.Storage.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: storageSize(ab)}},
		},
	}
}

// desiredDeployment runs the image with the claim mounted.
func desiredDeployment(ab *v1alpha1.AppBundle, local bool) *appsv1.Deployment {
	p := ab.Spec.ForProvider
	c := corev1.Container{
		Name:         containerName,
		Image:        p.Image,
		Env:          p.Env,
		VolumeMounts: []corev1.VolumeMount{{Name: volumeName, MountPath: mountPath(ab)}},
	}
	if p.Resources != nil {
		c.Resources = *p.Resources
	}
	if p.Port != nil {
		c.Ports = []corev1.ContainerPort{{Name: "app", ContainerPort: *p.Port, Protocol: corev1.ProtocolTCP}}
	}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: objectMeta(ab, ab.GetName(), local),
		Spec: appsv1.DeploymentSpec{
			Replicas: p.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector(ab)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(ab)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{c},
					Volumes: []corev1.Volume{{Name: volumeName, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: PVCName(ab)},
					}}},
				},
			},
		},
	}
	// A ReadWriteOnce claim cannot be mounted by a new pod on another node
	// while the old pod still holds it: replace pods instead of rolling them.
	for _, m := range accessModes(ab) {
		if m == corev1.ReadWriteOnce || m == corev1.ReadWriteOncePod {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}
	}
	return d
}

// desiredService exposes the port, or is nil when no Service is wanted.
func desiredService(ab *v1alpha1.AppBundle, local bool) *corev1.Service {
	if !wantsService(ab) {
		return nil
	}
	port := *ab.Spec.ForProvider.Port
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(ab, ab.GetName(), local),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceType(ab.Spec.ForProvider.Service),
			Selector: selector(ab),
			Ports:    []corev1.ServicePort{{Name: "app", Port: port, TargetPort: intOrString(port), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// ownedBy reports whether o was made for (or adopted by) the AppBundle.
func ownedBy(o client.Object, ab *v1alpha1.AppBundle) bool {
	return o.GetLabels()[LabelOwner] == ab.GetName()
}
