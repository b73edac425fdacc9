package managedkind

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// skipUnchangedStatus hands the managed reconciler a client that does not send
// status updates that would change nothing. The reconciler writes a managed
// resource's status after every reconcile, changed or not; the API server
// stores nothing for an unchanged one, but each is a request, and every
// safety-net poll of every converged resource would send one.
type skipUnchangedStatus struct{ ctrl.Manager }

func (m skipUnchangedStatus) GetClient() client.Client {
	return statusSkippingClient{Client: m.Manager.GetClient()}
}

type statusSkippingClient struct{ client.Client }

func (c statusSkippingClient) Status() client.SubResourceWriter {
	return statusSkippingWriter{SubResourceWriter: c.Client.Status(), reader: c.Client}
}

type statusSkippingWriter struct {
	client.SubResourceWriter
	reader client.Reader
}

// Update sends obj's status unless the cache holds obj at the same
// resourceVersion with the same status: the object the API server holds then,
// so the update would be a no-op. Anything else, a newer or older cached copy
// included, is sent and the API server decides.
func (w statusSkippingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if len(opts) == 0 && unchangedStatus(ctx, w.reader, obj) {
		return nil
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

func unchangedStatus(ctx context.Context, r client.Reader, obj client.Object) bool {
	cached, ok := obj.DeepCopyObject().(client.Object)
	if !ok || r.Get(ctx, client.ObjectKeyFromObject(obj), cached) != nil {
		return false
	}
	if cached.GetResourceVersion() != obj.GetResourceVersion() {
		return false
	}
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cached)
	if err != nil {
		return false
	}
	return equality.Semantic.DeepEqual(want["status"], have["status"])
}
