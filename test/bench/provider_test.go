//go:build bench

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// identity lets user act as a cluster admin, and gives its requests a
// FlowSchema of their own, so the API server's flow-control metrics count
// exactly them.
func identity(ctx context.Context, c client.Client, user string) error {
	for _, o := range []client.Object{
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		},
		&flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-high"},
				MatchingPrecedence:         100,
				DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}},
					ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
						Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, Namespaces: []string{"*"}, ClusterScope: true,
					}},
					NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
				}},
			},
		},
	} {
		if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	return nil
}

// providerProcess is cmd/provider running on the host.
type providerProcess struct {
	*testenv.Process
	metrics string // base URL of its metrics endpoint
	pprof   string // base URL of its pprof endpoint
	Rate    string // its --max-reconcile-rate, or "default"

	bin, kubeconfig, rate string
}

func startProvider(ctx context.Context, bin, kubeconfig, rate string) (*providerProcess, error) {
	return startReplica(ctx, "", bin, kubeconfig, rate)
}

// startReplica is startProvider for one of several replicas, named apart in
// its log file (bench-provider-<name>.log) and given extra flags.
func startReplica(ctx context.Context, name, bin, kubeconfig, rate string, extra ...string) (*providerProcess, error) {
	ports := make([]int, 3)
	for i := range ports {
		var err error
		if ports[i], err = testenv.FreePort(); err != nil {
			return nil, err
		}
	}
	args := []string{
		"--namespace=crossplane-system",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", ports[0]),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", ports[2]),
	}
	p := &providerProcess{Rate: "default", bin: bin, kubeconfig: kubeconfig, rate: rate,
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
		pprof:   fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", ports[2])}
	if rate != "" {
		args = append(args, "--max-reconcile-rate="+rate)
		p.Rate = rate
	}
	// BENCH_PROVIDER_ARGS adds flags, such as --debug to see why a run is slow.
	args = append(args, strings.Fields(os.Getenv("BENCH_PROVIDER_ARGS"))...)
	args = append(args, extra...)
	log := filepath.Join(os.TempDir(), "bench-provider.log")
	if name != "" {
		log = filepath.Join(os.TempDir(), "bench-provider-"+name+".log")
	}
	var err error
	if p.Process, err = testenv.StartProcess(log, bin, args, "KUBECONFIG="+kubeconfig); err != nil {
		return nil, err
	}
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if !p.Running() {
			return false, fmt.Errorf("the provider exited; see %s", log)
		}
		r, err := http.Get(ready)
		if err != nil {
			return false, nil //nolint:nilerr // Not up yet.
		}
		_ = r.Body.Close()
		return r.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func (p *providerProcess) stop() {
	if p != nil {
		p.Stop()
	}
}

// rssBytes is the provider's resident set size.
func (p *providerProcess) rssBytes() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.Pid())
}

// collectGarbage has the provider run a garbage collection (a heap profile
// with gc=1 does), so that heap figures are of live objects only.
func (p *providerProcess) collectGarbage() error {
	r, err := http.Get(p.pprof + "/heap?gc=1")
	if err != nil {
		return err
	}
	defer func() { _ = r.Body.Close() }()
	_, err = io.Copy(io.Discard, r.Body)
	return err
}

// profile saves the provider's pprof profile kind (with query) to path.
func (p *providerProcess) profile(kind, query, path string) error {
	r, err := http.Get(p.pprof + "/" + kind + "?" + query)
	if err != nil {
		return err
	}
	defer func() { _ = r.Body.Close() }()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(f, r.Body)
	return err
}

// apiserverProfile saves the API server's CPU profile of the next seconds to
// path: where it spends what one phase of a scenario costs it.
func apiserverProfile(ctx context.Context, seconds int, path string) error {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	b, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).Timeout(time.Duration(seconds+60) * time.Second).DoRaw(ctx)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// families are Prometheus metric families by name.
type families map[string]*dto.MetricFamily

func parse(r io.Reader) (families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// providerMetrics scrapes the provider's metrics endpoint.
func (p *providerProcess) providerMetrics() (families, error) {
	r, err := http.Get(p.metrics)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Body.Close() }()
	return parse(r.Body)
}

// apiserverMetrics scrapes the API server's metrics as the bench's admin.
func apiserverMetrics(ctx context.Context) (families, error) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return nil, err
	}
	b, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parse(strings.NewReader(string(b)))
}

// sum adds the values of the samples of family name whose labels include
// every pair in match; a label value "!x" matches any value but x.
func (f families) sum(name string, match map[string]string) float64 {
	mf, ok := f[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range match {
			if not, neg := strings.CutPrefix(v, "!"); neg {
				ok = ok && labels[k] != not
			} else {
				ok = ok && labels[k] == v
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// requestCounts are the provider's requests so far, as it counts them and as
// the API server does.
type requestCounts struct {
	client, clientWrites, server float64
}

func countRequests(ctx context.Context) (requestCounts, error) {
	pm, err := prov.providerMetrics()
	if err != nil {
		return requestCounts{}, err
	}
	am, err := apiserverMetrics(ctx)
	if err != nil {
		return requestCounts{}, err
	}
	return requestCounts{
		client:       pm.sum("rest_client_requests_total", nil),
		clientWrites: pm.sum("rest_client_requests_total", map[string]string{"method": "!GET"}),
		server:       am.sum("apiserver_flowcontrol_dispatched_requests_total", map[string]string{"flow_schema": providerUser}),
	}, nil
}
