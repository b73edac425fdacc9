package chaosagent

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/ownership"
)

const (
	// LabelBackupOf names the ChaosAgent a backup ConfigMap belongs to.
	LabelBackupOf = "chaos.clusterops.io/backup-of"

	// maxBackupBytes keeps a backup well below the 1 MiB an object may hold.
	maxBackupBytes = 900 * 1024

	kindDeployment = "deployment"
	kindConfigMap  = "configmap"
)

// backupMark marks an agent's backup ConfigMap as the agent's, by its name.
var backupMark = ownership.ByName(LabelBackupOf)

// errBackupFull is returned when an original no longer fits into the backup;
// the change that needed it is skipped.
var errBackupFull = errors.New("the backup ConfigMap is full")

// BackupName is the name of the ConfigMap, in the agent's namespace, that holds
// the originals of what the agent changed. Backups are kept out of status:
// status is rewritten on every reconcile and may be lost with the object.
func BackupName(ca *v1alpha1.ChaosAgent) string { return ca.GetName() + "-chaos-backup" }

// backupKey names the entry of an object: namespaces hold no dots, so the
// name after the second dot may.
func backupKey(kind, namespace, name string) string {
	return kind + "." + namespace + "." + name
}

func parseBackupKey(k string) (kind, namespace, name string, ok bool) {
	kind, rest, ok1 := strings.Cut(k, ".")
	namespace, name, ok2 := strings.Cut(rest, ".")
	return kind, namespace, name, ok1 && ok2 && namespace != "" && name != ""
}

// encodeData stores ConfigMap data as JSON of base64 values, so that it comes
// back byte for byte.
func encodeData(data map[string]string) string {
	raw := make(map[string][]byte, len(data))
	for k, v := range data {
		raw[k] = []byte(v)
	}
	b, _ := json.Marshal(raw) //nolint:errchkjson // A map of byte slices always marshals.
	return string(b)
}

func decodeData(s string) (map[string]string, error) {
	raw := map[string][]byte{}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		out[k] = string(v)
	}
	return out, nil
}

// A backup is the agent's backup ConfigMap on the target cluster. Entries are
// written before the change they back up, and only the first original of an
// object is kept: a second change of the same object must not back up the
// agent's own lorem ipsum.
type backup struct {
	c     client.Client
	agent *v1alpha1.ChaosAgent
	local bool
	cm    *corev1.ConfigMap // nil while it does not exist
}

func (b *backup) key() types.NamespacedName {
	return types.NamespacedName{Namespace: b.agent.GetNamespace(), Name: BackupName(b.agent)}
}

// load reads the backup; a missing one is not an error.
func (b *backup) load(ctx context.Context) error {
	cm := &corev1.ConfigMap{}
	err := b.c.Get(ctx, b.key(), cm)
	if kerrors.IsNotFound(err) {
		b.cm = nil
		return nil
	}
	if err != nil {
		return errors.Wrapf(err, "cannot get backup ConfigMap %q", b.key().Name)
	}
	switch ownership.Decide(ownership.Facts{Exists: true, Marked: backupMark.On(cm, b.agent), Wanted: true, Deleting: meta.WasDeleted(b.agent)}) {
	case ownership.Mine:
		b.cm = cm
	case ownership.InTheWay:
		return errors.Errorf("ConfigMap %q exists but is not the backup of this ChaosAgent; rename or delete it", b.key().Name)
	case ownership.None:
		// Someone else's, and the agent is going: it never held a backup
		// there, so there is nothing to restore and nothing to delete.
		b.cm = nil
	}
	return nil
}

func (b *backup) has(key string) bool {
	if b.cm == nil {
		return false
	}
	_, ok := b.cm.Data[key]
	return ok
}

// add records an original unless one is already recorded.
func (b *backup) add(ctx context.Context, key, value string) error {
	if b.has(key) {
		return nil
	}
	return b.put(ctx, key, value)
}

// put records an original, replacing what was recorded. The agent is the
// backup's only writer, but a stale read still gets a second chance.
func (b *backup) put(ctx context.Context, key, value string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := b.write(ctx, key, value)
		if kerrors.IsAlreadyExists(err) || kerrors.IsConflict(err) {
			if err := b.load(ctx); err != nil {
				return err
			}
			return b.write(ctx, key, value)
		}
		return err
	})
}

func (b *backup) write(ctx context.Context, key, value string) error {
	if b.cm == nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:      b.key().Name,
			Namespace: b.key().Namespace,
			Labels:    map[string]string{ownership.LabelManagedBy: ownership.ManagedBy},
		}}
		backupMark.Set(cm, b.agent)
		if b.local {
			meta.AddOwnerReference(cm, meta.AsOwner(meta.TypedReferenceTo(b.agent, v1alpha1.ChaosAgentGroupVersionKind)))
		}
		cm.Data = map[string]string{key: value}
		if err := b.c.Create(ctx, cm); err != nil {
			return errors.Wrapf(err, "cannot create backup ConfigMap %q", cm.GetName())
		}
		b.cm = cm
		return nil
	}
	size := 0
	for k, v := range b.cm.Data {
		if k != key {
			size += len(k) + len(v)
		}
	}
	if size+len(key)+len(value) > maxBackupBytes {
		return errBackupFull
	}
	cm := b.cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[key] = value
	if err := b.c.Update(ctx, cm); err != nil {
		return errors.Wrapf(err, "cannot update backup ConfigMap %q", cm.GetName())
	}
	b.cm = cm
	return nil
}

// delete removes the backup.
func (b *backup) delete(ctx context.Context) error {
	if b.cm == nil {
		return nil
	}
	err := b.c.Delete(ctx, b.cm, client.Preconditions{UID: &b.cm.UID})
	return errors.Wrapf(resource.IgnoreNotFound(err), "cannot delete backup ConfigMap %q", b.cm.GetName())
}

func replicasValue(n int32) string { return strconv.Itoa(int(n)) }

func parseReplicas(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), err
}
