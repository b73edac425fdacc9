package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// stormWindow is how long a failing managed resource is watched for retries,
// and stormBound how many writes it may cause in that time: crossplane's
// per-resource exponential backoff (1s, 2s, 4s, 8s, …) allows about four,
// and a retry storm would be hundreds.
const (
	stormWindow = 10 * time.Second
	stormBound  = 8
)

// TestRuntimeProblemsShowAsConditionsAndEventsWithBackoff creates managed resources that cannot do their job for
// reasons only visible at runtime. Each must show the problem in a condition
// with a reason and a message naming it, and in a Warning event; the
// provider must retry them with backoff, not in a storm; and it must keep
// working for other managed resources.
func TestRuntimeProblemsShowAsConditionsAndEventsWithBackoff(t *testing.T) {
	type problem struct {
		reason string
		// setup creates what the managed resource meets in namespace ns, and
		// returns the managed resource's YAML.
		setup func(t *testing.T, ns string) string
		// condition is the condition type that shows the problem.
		condition string
		// message must be in the condition's message and the event's.
		message []string
		// event is the Warning event's reason.
		event string
		// retried is whether the problem is an error the managed reconciler
		// retries with backoff; a missing source is no error, it is waited for.
		retried bool
	}
	cases := map[string]problem{
		"MissingSource": {
			reason: "A ConfigRollout whose ConfigMap does not exist rolls nothing and says which source is missing.",
			setup: func(_ *testing.T, _ string) string {
				return `{apiVersion: workload.clusterops.io/v1alpha1, kind: ConfigRollout, metadata: {name: missing-source}, spec: {forProvider: {configMaps: [{name: not-there}], workloads: [{kind: Deployment, name: web}]}}}`
			},
			condition: "Ready",
			message:   []string{`ConfigMap "not-there" does not exist`},
			event:     "SourceMissing",
		},
		"DeniedReach": {
			reason: "A CopyRule that reads from kube-system, which reach denies, is refused and says why.",
			setup: func(_ *testing.T, _ string) string {
				return `{apiVersion: copy.clusterops.io/v1alpha1, kind: CopyRule, metadata: {name: denied-reach}, spec: {forProvider: {kind: Secret, sourceNamespace: kube-system, names: [anything], allNamespaces: true}}}`
			},
			condition: "Synced",
			message:   []string{`namespace "kube-system" is out of reach`},
			event:     "CannotObserveExternalResource",
			retried:   true,
		},
		"ConflictingObject": {
			reason: "An AppBundle whose Deployment name is taken by someone else's Deployment leaves it alone and says so.",
			setup: func(t *testing.T, ns string) string {
				createYAML(t, fmt.Sprintf(`{apiVersion: apps/v1, kind: Deployment, metadata: {name: taken, namespace: %s}, spec: {selector: {matchLabels: {app: other}}, template: {metadata: {labels: {app: other}}, spec: {containers: [{name: c, image: nginx}]}}}}`, ns))
				return `{apiVersion: workload.clusterops.io/v1alpha1, kind: AppBundle, metadata: {name: taken}, spec: {forProvider: {image: nginx}}}`
			},
			condition: "Synced",
			message:   []string{`Deployment "taken" exists and was not created by this AppBundle`, "adoptExisting"},
			event:     "CannotObserveExternalResource",
			retried:   true,
		},
		"MissingProviderConfig": {
			reason: "A managed resource naming a ProviderConfig that does not exist says which one.",
			setup: func(_ *testing.T, _ string) string {
				return `{apiVersion: workload.clusterops.io/v1alpha1, kind: ImmortalContainer, metadata: {name: no-config}, spec: {providerConfigRef: {kind: ProviderConfig, name: nowhere}, forProvider: {image: nginx}}}`
			},
			condition: "Synced",
			message:   []string{`"nowhere"`, "does not exist"},
			event:     "CannotConnectToProvider",
			retried:   true,
		},
		"BadKubeconfigSecret": {
			reason: "A managed resource whose config's kubeconfig Secret holds garbage says which Secret and key.",
			setup: func(t *testing.T, ns string) string {
				createYAML(t, fmt.Sprintf(`{apiVersion: v1, kind: Secret, metadata: {name: kubeconfig, namespace: %s}, stringData: {config: "this is not a kubeconfig"}}`, ns))
				createYAML(t, fmt.Sprintf(`{apiVersion: clusterops.io/v1alpha1, kind: ClusterProviderConfig, metadata: {name: %s}, spec: {credentials: {source: Secret, secretRef: {name: kubeconfig, namespace: %s, key: config}}}}`, ns, ns))
				return fmt.Sprintf(`{apiVersion: copy.clusterops.io/v1alpha1, kind: CopyRule, metadata: {name: bad-kubeconfig}, spec: {providerConfigRef: {kind: ClusterProviderConfig, name: %s}, forProvider: {kind: ConfigMap, names: [a], allNamespaces: true}}}`, ns)
			},
			condition: "Synced",
			message:   []string{`key "config" of Secret`, "does not hold a valid kubeconfig"},
			event:     "CannotConnectToProvider",
			retried:   true,
		},
	}

	// The group ends when all its parallel cases have, before the last check.
	t.Run("Problems", func(t *testing.T) {
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				// The cases wait in parallel, so their storm windows overlap.
				t.Parallel()
				ns := env.Namespace(t, "rel-"+strings.ToLower(name), nil)
				u := createYAML(t, tc.setup(t, ns), ns)

				var cond map[string]any
				testenv.Eventually(t, wait, tc.condition+"=False on "+u.GetName(), func(ctx context.Context) (bool, error) {
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
						return false, err
					}
					cond = condition(u, tc.condition)
					return cond != nil && cond["status"] == "False" && containsAll(fmt.Sprint(cond["message"]), tc.message), nil
				})
				if r, _ := cond["reason"].(string); r == "" {
					t.Errorf("\n%s\n%s condition has no reason: %v", tc.reason, tc.condition, cond)
				}

				var ev corev1.Event
				testenv.Eventually(t, wait, "a Warning event "+tc.event, func(ctx context.Context) (bool, error) {
					evs := &corev1.EventList{}
					if err := env.Client.List(ctx, evs, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.name", u.GetName())}); err != nil {
						return false, err
					}
					for _, e := range evs.Items {
						if e.Type == corev1.EventTypeWarning && e.Reason == tc.event && containsAll(e.Message, tc.message) {
							ev = e
							return true, nil
						}
					}
					return false, nil
				})

				// No retry storm: the writes for this managed resource (status,
				// finalizers) and its events stay few over the window.
				mrPath := fmt.Sprintf("/namespaces/%s/%ss/%s", ns, strings.ToLower(u.GetKind()), u.GetName())
				evPath := fmt.Sprintf("/namespaces/%s/events", ns)
				mrBefore, evBefore := len(env.ManagerWrites.Writes(mrPath)), len(env.ManagerWrites.Writes(evPath))
				time.Sleep(stormWindow) // Counting what happens in a window, not waiting for something.
				mr, evs := len(env.ManagerWrites.Writes(mrPath))-mrBefore, len(env.ManagerWrites.Writes(evPath))-evBefore
				// Retried: each retry records its Warning event again. Without one
				// in the window, the bound below would hold for want of a retry.
				if tc.retried && evs == 0 {
					t.Errorf("\n%s\nno retry in %s after the problem showed (no Warning event written): want it retried with backoff", tc.reason, stormWindow)
				}
				if mr > stormBound || evs > stormBound {
					t.Errorf("\n%s\nin %s after the problem showed, %d writes of %s and %d of its events; want at most %d each", tc.reason, stormWindow, mr, u.GetName(), evs, stormBound)
				}
				t.Logf("%s: condition %s=%s (%s): %s; event %s (count %d); %d writes and %d event writes in %s",
					name, tc.condition, cond["status"], cond["reason"], cond["message"], ev.Reason, ev.Count, mr, evs, stormWindow)
			})
		}
	})

	// No crash: with all those failing, the provider still does its work for
	// others, after all the cases above.
	t.Run("ProviderKeepsWorking", func(t *testing.T) {
		src := env.Namespace(t, "team-rel-src", nil)
		dst := env.Namespace(t, "team-rel-dst", nil)
		createYAML(t, fmt.Sprintf(`{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: %s}, data: {a: b}}`, src))
		rule := createYAML(t, fmt.Sprintf(`{apiVersion: copy.clusterops.io/v1alpha1, kind: CopyRule, metadata: {name: healthy}, spec: {forProvider: {kind: ConfigMap, names: [settings], namespaces: [%s]}}}`, dst), src)
		testenv.Eventually(t, wait, "the copy and Ready=True", func(ctx context.Context) (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: dst, Name: "settings"}, &corev1.ConfigMap{}); err != nil {
				return false, err
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rule), rule); err != nil {
				return false, err
			}
			c := condition(rule, "Ready")
			return c != nil && c["status"] == "True", nil
		})
	})
}

// createYAML creates the object in y, in namespace ns when one is given, and
// deletes it when the test ends.
func createYAML(t *testing.T, y string, ns ...string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	if len(ns) > 0 {
		u.SetNamespace(ns[0])
	}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("cannot create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
	return u
}

// condition returns the condition of type ct in u's status, or nil.
func condition(u *unstructured.Unstructured, ct string) map[string]any {
	cs, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok && m["type"] == ct {
			return m
		}
	}
	return nil
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
