package chaosagent

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/shard"
)

// evict asks the API server to evict a pod, once. client-go retries a 429
// that carries Retry-After, as the answer for a disruption budget whose status
// is not yet current does, for up to ten rounds of that wait; a refusal must
// come back at once, to be reported, so this request is never retried. It
// goes around the target cluster's fenced client, so it asks the fence
// itself (TestEvictAsksTheFence).
func evict(ctx context.Context, cfg *rest.Config, pod *corev1.Pod) error {
	if err := shard.CheckWrite(ctx); err != nil {
		return errors.Wrap(err, "cannot evict")
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return errors.Wrap(err, "cannot create a client for the Eviction API")
	}
	body, err := json.Marshal(&policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	})
	if err != nil {
		return errors.Wrap(err, "cannot encode eviction")
	}
	return rc.Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("eviction").
		SetHeader("Content-Type", "application/json").MaxRetries(0).Body(body).Do(ctx).Error()
}
