// Package reach decides which namespaces a managed resource may act in. Every
// kind asks this package before it touches a namespace, its own included, so
// that the rules live in one place.
package reach

import (
	"fmt"
	"path"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// DefaultDenied are the namespaces a ClusterProviderConfig denies unless it
// says otherwise (the CRD defaults the field to the same list).
var DefaultDenied = []string{"kube-system", "kube-public", "kube-node-lease"}

// A Policy is the resolved reach of one ProviderConfig or ClusterProviderConfig
// on the cluster it describes. The zero value grants nothing.
type Policy struct {
	// Config names the config the policy comes from, for messages, such as
	// `ClusterProviderConfig "default"`.
	Config string

	// OwnNamespace grants a managed resource its own namespace without a
	// grant in Namespaces or Selector: true for a ProviderConfig (its
	// namespace's own credentials) and for a ClusterProviderConfig of the
	// provider's own cluster. On another cluster, a namespace of the same
	// name is not the managed resource's, and only a grant reaches it.
	OwnNamespace bool

	// Namespaces are names or glob patterns that are reachable.
	Namespaces []string

	// Selector selects reachable namespaces by label; nil selects none.
	Selector labels.Selector

	// Denied are names or glob patterns that are never reachable.
	Denied []string

	// ProviderNamespace is the namespace the provider runs in; always denied.
	ProviderNamespace string
}

// OutOfReachError tells why a namespace may not be acted in.
type OutOfReachError struct {
	Namespace string
	Reason    string

	// Unmatched is true when the namespace is refused only because no grant
	// matched it; with its labels, a selector might still match.
	Unmatched bool
}

func (e *OutOfReachError) Error() string {
	return fmt.Sprintf("namespace %q is out of reach: %s", e.Namespace, e.Reason)
}

// IsOutOfReach reports whether err (or an error it wraps) is an OutOfReachError.
func IsOutOfReach(err error) bool {
	var e *OutOfReachError
	return errors.As(err, &e)
}

// NeedsLabels reports whether Check needs a namespace's labels to decide.
func (p Policy) NeedsLabels() bool {
	return p.Selector != nil && !p.Selector.Empty()
}

// Check returns nil when a managed resource in namespace own may act in
// namespace ns, whose labels are nsLabels, and an *OutOfReachError otherwise.
// The provider's namespace and Denied win over every grant, the own namespace
// included; the own namespace is granted only with OwnNamespace (TestCheckRefusesDeniedBeforeGrantingOwn).
func (p Policy) Check(own, ns string, nsLabels map[string]string) error {
	deny := func(format string, a ...any) error {
		return &OutOfReachError{Namespace: ns, Reason: fmt.Sprintf(format, a...)}
	}
	switch ns {
	case "":
		return deny("no namespace given")
	case p.ProviderNamespace:
		return deny("it is the provider's own namespace")
	}
	if pattern, ok := matchAny(p.Denied, ns); ok {
		return deny("%s denies it (deniedNamespaces: %q)", p.Config, pattern)
	}
	if ns == own && p.OwnNamespace {
		return nil
	}
	if len(p.Namespaces) == 0 && p.Selector == nil {
		if p.OwnNamespace {
			return deny("%s grants no reach beyond the managed resource's namespace %q", p.Config, own)
		}
		return deny("%s grants no reach, and on its cluster a namespace is reached only through a grant", p.Config)
	}
	if _, ok := matchAny(p.Namespaces, ns); ok {
		return nil
	}
	if p.NeedsLabels() && p.Selector.Matches(labels.Set(nsLabels)) {
		return nil
	}
	reason := fmt.Sprintf("it matches neither reach.namespaces nor reach.namespaceSelector of %s", p.Config)
	if ns == own && !p.OwnNamespace {
		reason += ", which is for another cluster, where a namespace of the managed resource's name is not its own"
	}
	return &OutOfReachError{Namespace: ns, Reason: reason, Unmatched: true}
}

// matchAny returns the first pattern that matches name. Namespace names hold no
// '/', so path.Match globs behave as plain wildcards; a malformed pattern
// (rejected at admission anyway) matches nothing.
func matchAny(patterns []string, name string) (string, bool) {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return p, true
		}
	}
	return "", false
}
