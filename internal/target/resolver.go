package target

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/reach"
	"github.com/clusterops/provider-clusterops/internal/version"
)

// defaultSecretRecheck is how long a client built from a kubeconfig Secret is
// reused before the Secret is read again to see whether it was rotated. A change
// of the config itself is seen at once.
const defaultSecretRecheck = time.Minute

// LocalID is the ID of the cluster the provider runs in.
const LocalID = "local"

// A Resolver resolves managed resources to the cluster they act on.
type Resolver struct {
	kube client.Client // control plane; reads configs from the manager's cache
	// live reads from the API server: kubeconfig Secrets, so no Secret
	// informer is started, usages, and the config of a resource being
	// deleted.
	live   client.Reader
	local  *rest.Config
	scheme *runtime.Scheme

	providerNamespace string
	recheck           time.Duration
	now               func() time.Time

	mu       sync.Mutex
	localCli client.Client
	remote   map[string]*remoteEntry // by config kind/namespace/name
	// recovered are told the ConfigKey of a remote cluster's config when
	// the cluster answers again after an outage.
	recovered map[int]func(configKey string)
	nextID    int
}

// ConfigKey names the config mg's spec.providerConfigRef points at: its kind,
// namespace (a ProviderConfig's is mg's own, a ClusterProviderConfig has
// none) and name; "" when there is no reference.
func ConfigKey(mg resource.ModernManaged) string {
	ref := mg.GetProviderConfigReference()
	if ref == nil || ref.Name == "" {
		return ""
	}
	ns := ""
	if ref.Kind == v1alpha1.ProviderConfigKind {
		ns = mg.GetNamespace()
	}
	return ref.Kind + "/" + ns + "/" + ref.Name
}

// OnRecovered calls fn with the ConfigKey of a remote cluster's config each
// time that cluster answers again after an outage, until ctx ends: the
// managed resources that failed while it was away need not wait for their
// backoff to end.
func (r *Resolver) OnRecovered(ctx context.Context, fn func(configKey string)) {
	r.mu.Lock()
	if r.recovered == nil {
		r.recovered = map[int]func(string){}
	}
	id := r.nextID
	r.nextID++
	r.recovered[id] = fn
	r.mu.Unlock()
	go func() {
		<-ctx.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.recovered, id)
	}()
}

// clusterBack tells every OnRecovered function that the cluster of the config
// key names answers again.
func (r *Resolver) clusterBack(key string) {
	r.mu.Lock()
	fns := make([]func(string), 0, len(r.recovered))
	for _, fn := range r.recovered {
		fns = append(fns, fn)
	}
	r.mu.Unlock()
	for _, fn := range fns {
		fn(key)
	}
}

type remoteEntry struct {
	uid        types.UID
	generation int64
	digest     [sha256.Size]byte
	checked    time.Time
	cluster    *Cluster
}

// An Option configures a Resolver.
type Option func(*Resolver)

// WithProviderNamespace sets the provider's own namespace, which no managed
// resource may reach into.
func WithProviderNamespace(ns string) Option { return func(r *Resolver) { r.providerNamespace = ns } }

// NewResolver returns a Resolver. kube is the control-plane client (configs are
// read through it), live an uncached reader (kubeconfig Secrets, and the
// config of a resource being deleted), local the provider's own REST config
// (InjectedIdentity).
func NewResolver(kube client.Client, live client.Reader, local *rest.Config, s *runtime.Scheme, o ...Option) *Resolver {
	r := &Resolver{
		kube:    kube,
		live:    live,
		local:   local,
		scheme:  s,
		recheck: defaultSecretRecheck,
		now:     time.Now,
		remote:  map[string]*remoteEntry{},
	}
	for _, fn := range o {
		fn(r)
	}
	return r
}

// resolvedConfig is what a managed resource's config says, whichever its kind.
type resolvedConfig struct {
	object    metav1.Object
	key       string // ConfigKey
	display   string
	source    string
	secretRef *types.NamespacedName
	secretKey string
	reach     reach.Policy
}

// Resolve tracks that mg uses its config and returns the cluster it acts on.
func (r *Resolver) Resolve(ctx context.Context, mg resource.ModernManaged) (*Cluster, error) {
	// The usage records the managed resource's kind, which typed objects read
	// through a client do not always carry.
	if mg.GetObjectKind().GroupVersionKind().Empty() {
		gvk, err := apiutil.GVKForObject(mg, r.scheme)
		if err != nil {
			return nil, errors.Wrap(err, "cannot determine the managed resource's kind")
		}
		mg.GetObjectKind().SetGroupVersionKind(gvk)
	}
	ref := mg.GetProviderConfigReference()
	switch {
	case ref == nil:
		return nil, errors.New("managed resource does not reference a ProviderConfig")
	case ref.Kind == "":
		return nil, errors.New("managed resource ProviderConfig reference has no Kind")
	}
	if err := r.track(ctx, mg, *ref, string(mg.GetUID())); err != nil {
		return nil, err
	}
	rc, err := r.config(ctx, mg)
	if err != nil {
		return nil, err
	}
	rc.key = ConfigKey(mg)
	return r.cluster(ctx, rc)
}

// cluster returns the cluster config rc describes, with the reach it grants.
func (r *Resolver) cluster(ctx context.Context, rc *resolvedConfig) (*Cluster, error) {
	switch rc.source {
	case string(v1alpha1.CredentialsSourceInjectedIdentity):
		c, err := r.localClient()
		if err != nil {
			return nil, err
		}
		return &Cluster{ID: LocalID, Client: c, Config: r.local, Local: true, Reach: rc.reach}, nil
	case string(v1alpha1.CredentialsSourceSecret):
		return r.remoteCluster(ctx, rc)
	default:
		return nil, errors.Errorf("%s has unsupported credentials source %q", rc.display, rc.source)
	}
}

// config reads mg's config. A resource being deleted reads it from the API
// server: what it leaves in a namespace its config does not reach stays for
// good, so it decides on the newest reach rather than on a cache a moment
// behind an edit that allows a namespace again
// (TestDeletedResourceDecidesOnTheNewestReach). Deletions are few; the read
// costs one request each.
func (r *Resolver) config(ctx context.Context, mg resource.ModernManaged) (*resolvedConfig, error) {
	ref := mg.GetProviderConfigReference()
	if ref == nil || ref.Name == "" {
		return nil, errors.New("spec.providerConfigRef is not set")
	}
	read := client.Reader(r.kube)
	if mg.GetDeletionTimestamp() != nil {
		read = r.live
	}
	switch ref.Kind {
	case v1alpha1.ProviderConfigKind:
		pc := &v1alpha1.ProviderConfig{}
		display := fmt.Sprintf("ProviderConfig %q in namespace %q", ref.Name, mg.GetNamespace())
		if err := read.Get(ctx, types.NamespacedName{Namespace: mg.GetNamespace(), Name: ref.Name}, pc); err != nil {
			return nil, notFoundOr(err, display)
		}
		rc := &resolvedConfig{
			object:  pc,
			display: display,
			source:  string(pc.Spec.Credentials.Source),
			// A namespaced config holds its namespace's own credentials: it
			// acts in that namespace of its cluster and never beyond.
			reach: reach.Policy{Config: fmt.Sprintf("ProviderConfig %q", ref.Name), OwnNamespace: true, ProviderNamespace: r.providerNamespace},
		}
		if s := pc.Spec.Credentials.SecretRef; s != nil {
			rc.secretRef = &types.NamespacedName{Namespace: pc.GetNamespace(), Name: s.Name}
			rc.secretKey = s.Key
		}
		return rc, nil
	case v1alpha1.ClusterProviderConfigKind:
		cpc := &v1alpha1.ClusterProviderConfig{}
		display := fmt.Sprintf("ClusterProviderConfig %q", ref.Name)
		if err := read.Get(ctx, types.NamespacedName{Name: ref.Name}, cpc); err != nil {
			return nil, notFoundOr(err, display)
		}
		p, err := policyOf(display, cpc.Spec.Reach, r.providerNamespace)
		if err != nil {
			return nil, err
		}
		// On another cluster a namespace named like the managed resource's
		// is not the tenant's: only the config's grants reach it.
		p.OwnNamespace = cpc.Spec.Credentials.Source == v1alpha1.CredentialsSourceInjectedIdentity
		rc := &resolvedConfig{object: cpc, display: display, source: string(cpc.Spec.Credentials.Source), reach: p}
		if s := cpc.Spec.Credentials.SecretRef; s != nil {
			rc.secretRef = &types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
			rc.secretKey = s.Key
		}
		return rc, nil
	default:
		return nil, errors.Errorf("spec.providerConfigRef.kind %q is not supported: use ProviderConfig or ClusterProviderConfig", ref.Kind)
	}
}

func notFoundOr(err error, display string) error {
	if kerrors.IsNotFound(err) {
		return errors.Errorf("%s does not exist: create it, or point spec.providerConfigRef at one that does", display)
	}
	return errors.Wrapf(err, "cannot get %s", display)
}

// policyOf turns a ClusterProviderConfig's reach into a Policy.
func policyOf(display string, rc *v1alpha1.Reach, providerNamespace string) (reach.Policy, error) {
	p := reach.Policy{Config: display, Denied: reach.DefaultDenied, ProviderNamespace: providerNamespace}
	if rc == nil {
		return p, nil
	}
	p.Namespaces = rc.Namespaces
	if rc.DeniedNamespaces != nil {
		p.Denied = rc.DeniedNamespaces
	}
	if rc.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(rc.NamespaceSelector)
		if err != nil {
			return p, errors.Wrapf(err, "%s has an invalid reach.namespaceSelector", display)
		}
		p.Selector = s
	}
	return p, nil
}

func (r *Resolver) localClient() (client.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.localCli != nil {
		return r.localCli, nil
	}
	c, err := r.newClient(r.local)
	if err != nil {
		return nil, errors.Wrap(err, "cannot create a client for the provider's own cluster")
	}
	r.localCli = c
	return c, nil
}

// remoteCluster returns the cached client of a kubeconfig-based config, reading
// the Secret again only when the config changed or the recheck interval passed,
// and building a new client only when the kubeconfig itself changed.
func (r *Resolver) remoteCluster(ctx context.Context, rc *resolvedConfig) (*Cluster, error) {
	if rc.secretRef == nil || rc.secretKey == "" {
		return nil, errors.Errorf("%s uses credentials source Secret but sets no credentials.secretRef", rc.display)
	}
	key := rc.display
	uid, gen := rc.object.GetUID(), rc.object.GetGeneration()

	r.mu.Lock()
	e := r.remote[key]
	if e != nil && e.uid == uid && e.generation == gen && r.now().Sub(e.checked) < r.recheck {
		c := *e.cluster
		r.mu.Unlock()
		c.Reach = rc.reach
		return &c, nil
	}
	r.mu.Unlock()

	kubeconfig, err := r.kubeconfig(ctx, rc)
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256(kubeconfig)

	r.mu.Lock()
	defer r.mu.Unlock()
	if e = r.remote[key]; e != nil && e.digest == digest {
		e.uid, e.generation, e.checked = uid, gen, r.now()
		c := *e.cluster
		c.Reach = rc.reach
		return &c, nil
	}
	// Errors from parsing are not wrapped: they may quote the Secret's content.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, errors.Errorf("key %q of Secret %s (used by %s) does not hold a valid kubeconfig", rc.secretKey, rc.secretRef, rc.display)
	}
	// Every client and watch of the cluster shares one health, through the
	// config's transport.
	h := newHealth(rc.display, r.now)
	configKey := rc.key
	h.back = func() { r.clusterBack(configKey) }
	cfg.Wrap(h.wrap)
	cli, err := r.newClient(cfg)
	if err != nil {
		return nil, errors.Wrapf(err, "cannot create a client from the kubeconfig of %s", rc.display)
	}
	if h.probe, err = prober(cfg); err != nil {
		return nil, errors.Wrapf(err, "cannot create a client from the kubeconfig of %s", rc.display)
	}
	cl := &Cluster{ID: fmt.Sprintf("%s@%x", rc.display, digest[:8]), Client: cli, Config: cfg, health: h}
	r.remote[key] = &remoteEntry{uid: uid, generation: gen, digest: digest, checked: r.now(), cluster: cl}
	c := *cl
	c.Reach = rc.reach
	return &c, nil
}

func (r *Resolver) kubeconfig(ctx context.Context, rc *resolvedConfig) ([]byte, error) {
	s := &corev1.Secret{}
	if err := r.live.Get(ctx, *rc.secretRef, s); err != nil {
		if kerrors.IsNotFound(err) {
			return nil, errors.Errorf("Secret %s named in credentials.secretRef of %s does not exist", rc.secretRef, rc.display)
		}
		return nil, errors.Wrapf(err, "cannot get Secret %s named in credentials.secretRef of %s", rc.secretRef, rc.display)
	}
	data, ok := s.Data[rc.secretKey]
	if !ok || len(data) == 0 {
		return nil, errors.Errorf("Secret %s has no key %q, which credentials.secretRef of %s names", rc.secretRef, rc.secretKey, rc.display)
	}
	return data, nil
}

// prober asks a cluster's API server for /readyz: any answer, an error
// status included, shows it is there.
func prober(cfg *rest.Config) (func(context.Context) error, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/readyz"
	readyz := u.String()
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}, nil
}

func (r *Resolver) newClient(cfg *rest.Config) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "provider-clusterops/" + version.Version
	// No client-side rate, as for the manager's clients (flow.Control.Bound):
	// a remote cluster's priority and fairness protects it.
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: r.scheme})
	if err != nil {
		return nil, err
	}
	return fenced(c), nil
}
