package appbundle

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/drift"
)

// An object drifted when what the provider's field manager owns of it (its
// managed fields entry, as Extract* reads it) differs from what the AppBundle
// wants: a field another client changed or removed is no longer the
// provider's, so it shows as missing. Fields others own or the API server
// defaulted are not the provider's and are never compared, so they cause no
// write; and every field of the desired object is compared, with no second
// list to keep in step.

// noStatus: the provider applies no status, and the API server gives no
// applier the status of an object with a status subresource; controller-runtime's
// fake client does, so the status is dropped from what is compared.

// deploymentDrifted, serviceDrifted and claimDrifted return the fields of an
// object that drifted from what is wanted: none when it did not.
func deploymentDrifted(want *appsv1ac.DeploymentApplyConfiguration, live *appsv1.Deployment) ([]string, error) {
	owned, err := appsv1ac.ExtractDeployment(live, FieldManager)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot extract the fields of Deployment %q", live.GetName())
	}
	owned.Status = nil // See noStatus.
	return differ[appsv1.Deployment](want, owned)
}

func serviceDrifted(want *corev1ac.ServiceApplyConfiguration, live *corev1.Service) ([]string, error) {
	owned, err := corev1ac.ExtractService(live, FieldManager)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot extract the fields of Service %q", live.GetName())
	}
	owned.Status = nil // See noStatus.
	return differ[corev1.Service](want, owned)
}

func claimDrifted(want *corev1ac.PersistentVolumeClaimApplyConfiguration, live *corev1.PersistentVolumeClaim) ([]string, error) {
	owned, err := corev1ac.ExtractPersistentVolumeClaim(live, FieldManager)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot extract the fields of PersistentVolumeClaim %q", live.GetName())
	}
	owned.Status = nil // See noStatus.
	return differ[corev1.PersistentVolumeClaim](want, owned)
}

// differ returns the fields at which two apply configurations of a T say
// different things; none when they agree. Both are read as a T, as the API
// server stores them, so that forms it does not keep apart compare equal: an
// empty value and no value, "1024Mi" and "1Gi" (quantities compare by value),
// an empty list and none. Comparing the configurations as they are would see
// drift in these forever.
func differ[T any](want, owned any) ([]string, error) {
	var w, o T
	if err := convert(want, &w); err != nil {
		return nil, err
	}
	if err := convert(owned, &o); err != nil {
		return nil, err
	}
	if equality.Semantic.DeepEqual(w, o) {
		return nil, nil
	}
	fields, err := drift.Fields(w, o)
	if len(fields) == 0 {
		// Equal in JSON, apart in memory: still a difference to repair.
		fields = []string{"."}
	}
	return fields, err
}

// convert reads in as out, through their JSON form: API types and apply
// configurations of them share it.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return errors.Wrapf(err, "cannot encode %T", in)
	}
	return errors.Wrapf(json.Unmarshal(b, out), "cannot decode %T as %T", in, out)
}

// A pvcChange is what may, and what may not, be done to bring an existing
// claim to what the AppBundle wants.
type pvcChange struct {
	// Apply is true when the claim should be written: what the provider owns
	// of it drifted, and no wanted change is refused.
	Apply bool
	// Refused says why a wanted change cannot be made; empty when none is refused.
	Refused string
	// Drifted are the fields of the claim that drifted.
	Drifted []string
}

// pvcDiff says what may be done to the claim got, which drifted from want or
// not. Access modes and storage class are immutable, and a claim can only
// grow, and only where its storage class allows expansion (expandable).
func pvcDiff(want *corev1ac.PersistentVolumeClaimApplyConfiguration, got *corev1.PersistentVolumeClaim, drifted, expandable bool) pvcChange {
	if refused := pvcRefusal(want, got, expandable); refused != "" {
		return pvcChange{Refused: refused}
	}
	return pvcChange{Apply: drifted}
}

func pvcRefusal(want *corev1ac.PersistentVolumeClaimApplyConfiguration, got *corev1.PersistentVolumeClaim, expandable bool) string {
	if !equality.Semantic.DeepEqual(got.Spec.AccessModes, want.Spec.AccessModes) {
		return fmt.Sprintf("accessModes of PersistentVolumeClaim %q cannot change from %v to %v once it exists", got.Name, got.Spec.AccessModes, want.Spec.AccessModes)
	}
	if sc := want.Spec.StorageClassName; sc != nil && (got.Spec.StorageClassName == nil || *got.Spec.StorageClassName != *sc) {
		return fmt.Sprintf("storageClassName of PersistentVolumeClaim %q cannot change once it exists", got.Name)
	}
	w, g := wantedSize(want), got.Spec.Resources.Requests[corev1.ResourceStorage]
	switch cmp := w.Cmp(g); {
	case cmp < 0:
		return fmt.Sprintf("PersistentVolumeClaim %q cannot shrink from %s to %s", got.Name, g.String(), w.String())
	case cmp > 0 && !expandable:
		return fmt.Sprintf("PersistentVolumeClaim %q cannot grow from %s to %s: its storage class does not allow volume expansion", got.Name, g.String(), w.String())
	}
	return ""
}

// wantedSize is the storage the claim want requests.
func wantedSize(want *corev1ac.PersistentVolumeClaimApplyConfiguration) resource.Quantity {
	if r := want.Spec.Resources; r != nil && r.Requests != nil {
		return (*r.Requests)[corev1.ResourceStorage]
	}
	return resource.Quantity{}
}
