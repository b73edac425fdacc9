package copyrule

import (
	"context"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/internal/target"
)

// grantsFor is how long a cluster's answer to whether the provider may read
// a kind holds: an administrator's grant is seen within it.
const grantsFor = 30 * time.Second

// grants remembers, by cluster and resource, whether the provider may list
// and watch a kind beyond ConfigMaps and Secrets in every namespace. A rule
// of a kind it may not read starts no watch of it: each such watch would
// retry its list for as long as the rule lives, 10,000 lists every backoff
// for a fleet of 10,000 rules. One access review per kind and cluster every
// grantsFor answers for all of them.
type grants struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[grantKey]grant
}

type grantKey struct {
	cluster  string
	resource schema.GroupResource
}

type grant struct {
	allowed bool
	at      time.Time
}

func newGrants() *grants {
	return &grants{now: time.Now, m: map[grantKey]grant{}}
}

// check returns nil when the provider may list and watch kind k in every
// namespace of cluster c, and otherwise an error that says what grants it.
func (g *grants) check(ctx context.Context, c *target.Cluster, k Mapping) error {
	if k.typed() || c.Client == nil {
		return nil
	}
	key := grantKey{cluster: c.ID, resource: k.Resource.GroupResource()}
	g.mu.Lock()
	got, ok := g.m[key]
	g.mu.Unlock()
	if !ok || g.now().Sub(got.at) >= grantsFor {
		allowed, err := mayReadAll(ctx, c, k.Resource)
		if err != nil {
			return err
		}
		got = grant{allowed: allowed, at: g.now()}
		g.mu.Lock()
		g.m[key] = got
		g.mu.Unlock()
	}
	if !got.allowed {
		return &notGranted{msg: refusal(k) + ": list and watch in every namespace are not granted"}
	}
	return nil
}

// notGranted is a kind the provider may not read on the cluster: the rule
// waits, with the message in its conditions, until an administrator grants it.
type notGranted struct{ msg string }

func (e *notGranted) Error() string { return e.msg }

// isNotGranted reports whether err is a notGranted.
func isNotGranted(err error) bool {
	var n *notGranted
	return errors.As(err, &n)
}

// mayReadAll asks cluster c whether the provider may list and watch r in
// every namespace.
func mayReadAll(ctx context.Context, c *target.Cluster, r schema.GroupVersionResource) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		rv := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Version: r.Version, Resource: r.Resource},
		}}
		if err := c.Client.Create(ctx, rv); err != nil {
			return false, errors.Wrapf(err, "cannot ask whether the provider may %s %s", verb, r.GroupResource())
		}
		if !rv.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}
