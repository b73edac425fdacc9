package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// TestGeneratedFilesAreCurrent fails when a committed generated file differs
// from what the generator makes: run make monitoring and commit the result.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Errorf("%s: %v: run make monitoring", f.path, err)
			continue
		}
		if !bytes.Equal(got, f.content) {
			t.Errorf("%s is not what hack/monitoring generates: run make monitoring and commit the result", f.path)
		}
	}
}

// promtool is the promtool that cluster/local/build-tools.sh builds
// (PROMTOOL overrides it).
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	out, err := exec.Command(filepath.Join(root, "cluster/local/build-tools.sh"), "prometheus-dir").Output()
	if err != nil {
		t.Fatalf("cannot find the prometheus tools directory: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "promtool")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v; build it with cluster/local/build-tools.sh prometheus (make test does)", p, err)
	}
	return p
}

// TestRulesFilesPassPromtool runs promtool check rules on both rules files: each parses,
// and each alert has its annotations.
func TestRulesFilesPassPromtool(t *testing.T) {
	tool := promtool(t)
	for _, f := range []string{pathRules, pathE2ERules} {
		out, err := exec.Command(tool, "check", "rules", "--lint=all", "--lint-fatal", filepath.Join(root, f)).CombinedOutput()
		if err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", f, err, out)
		}
	}
}

// A ruleCase is a promtool rule unit test: the series, when to evaluate, and
// the alerts that must fire then (none: the series are healthy).
type ruleCase struct {
	alert  string
	series map[string]string
	at     string
	// fire holds each alert's labels, less severity and alertname, and its
	// description.
	fire []firing
}

type firing struct {
	labels      map[string]string
	description string
}

const (
	inst       = `instance="provider:8080",job="provider-clusterops"`
	copyGVK    = `copy.clusterops.io/v1alpha1, Kind=CopyRule`
	rolloutGVK = `workload.clusterops.io/v1alpha1, Kind=ConfigRollout`
	copyCtrl   = `managed/copyrule.copy.clusterops.io`
)

// ruleCases fire each alert on the series that mean it, and leave it silent
// on healthy series close to them.
func ruleCases() map[string]ruleCase {
	urgent := func(le, v string) string {
		return `clusterops_urgent_wait_seconds_bucket{controller="` + copyCtrl + `",le="` + le + `",` + inst + `}`
	}
	return map[string]ruleCase{
		// A rule stale at 60 s (behind since 0 with a staleAfter of a
		// minute), another stale only at 1200 s (a staleAfter of 20m).
		"StaleCopy": {alert: "ClusteropsCopiesStale", at: "15m",
			series: map[string]string{
				`clusterops_copyrule_stale_at_timestamp_seconds{namespace="team-a",name="settings",` + inst + `}`: "60x30",
				`clusterops_copyrule_stale_at_timestamp_seconds{namespace="team-b",name="slow",` + inst + `}`:     "1200x30",
			},
			fire: []firing{{labels: map[string]string{"namespace": "team-a", "name": "settings", "instance": "provider:8080", "job": "provider-clusterops"},
				description: "CopyRule team-a/settings has copies out of sync with their source for 14m 0s beyond its staleAfter. " +
					"It is Fresh=False (reason Stale) and names each copy and why in status.atProvider.problems: kubectl get copyrule -n team-a settings -o yaml."}}},
		"CopyCatchingUp": {alert: "ClusteropsCopiesStale", at: "15m",
			series: map[string]string{`clusterops_copyrule_stale_at_timestamp_seconds{namespace="team-a",name="settings",` + inst + `}`: "1200x30"}},
		"CopiesInSync": {alert: "ClusteropsCopiesStale", at: "15m",
			series: map[string]string{`clusterops_copyrule_stale_at_timestamp_seconds{namespace="team-a",name="other",` + inst + `}`: "_x30"}},

		"RolloutHalted": {alert: "ClusteropsRolloutHalted", at: "5m",
			series: map[string]string{
				`clusterops_configrollout_phase{namespace="team-a",name="waves",phase="Halted",` + inst + `}`:  "_x2 1x30",
				`clusterops_configrollout_phase{namespace="team-b",name="other",phase="Rolling",` + inst + `}`: "1x30",
			},
			fire: []firing{{labels: map[string]string{"namespace": "team-a", "name": "waves"},
				description: "ConfigRollout team-a/waves is halted: status.atProvider.progress.halted names the workload still in flight past progressDeadline " +
					"(Progressing=False, reason ProgressDeadlineExceeded). It resumes when that workload is available, the sources change again, " +
					"or progressDeadline is raised: kubectl get configrollout -n team-a waves -o yaml."}}},
		"RolloutResumed": {alert: "ClusteropsRolloutHalted", at: "10m",
			series: map[string]string{
				`clusterops_configrollout_phase{namespace="team-a",name="waves",phase="Halted",` + inst + `}`:  "1x4 _x30",
				`clusterops_configrollout_phase{namespace="team-a",name="waves",phase="Rolling",` + inst + `}`: "_x4 1x30",
			}},

		"RolloutNotReady": {alert: "ClusteropsRolloutNotReady", at: "20m",
			series: map[string]string{
				`crossplane_managed_resource_exists{gvk="` + rolloutGVK + `",` + inst + `}`: "3x30",
				`crossplane_managed_resource_ready{gvk="` + rolloutGVK + `",` + inst + `}`:  "2x30",
			},
			fire: []firing{{labels: map[string]string{"gvk": rolloutGVK},
				description: "1 ConfigRollout(s) have not been Ready for 15 minutes: a workload still in flight past progressDeadline halts a rollout " +
					"(Progressing=False, reason ProgressDeadlineExceeded), and a missing source or a rollout limit holds one back. " +
					"kubectl get configrollouts -A -o wide names them (column PHASE)."}}},
		"RolloutRollingAWhile": {alert: "ClusteropsRolloutNotReady", at: "20m",
			series: map[string]string{
				`crossplane_managed_resource_exists{gvk="` + rolloutGVK + `",` + inst + `}`: "3x30",
				`crossplane_managed_resource_ready{gvk="` + rolloutGVK + `",` + inst + `}`:  "3x10 2x20",
			}},
		"RolloutsReady": {alert: "ClusteropsRolloutNotReady", at: "20m",
			series: map[string]string{
				`crossplane_managed_resource_exists{gvk="` + rolloutGVK + `",` + inst + `}`: "3x30",
				`crossplane_managed_resource_ready{gvk="` + rolloutGVK + `",` + inst + `}`:  "3x30",
			}},

		"AgentPaused": {alert: "ClusteropsChaosPausedBySteadyState", at: "35m",
			series: map[string]string{`clusterops_chaos_acting{agent="shop/edmund",reason="SteadyStateViolated",` + inst + `}`: "0x40"},
			fire: []firing{{labels: map[string]string{"agent": "shop/edmund"},
				description: "ChaosAgent shop/edmund has been paused for 30 minutes because its targets are below their steady state " +
					"(Acting=False, reason SteadyStateViolated): the workloads it disturbs are not healthy on their own."}}},
		"AgentActing": {alert: "ClusteropsChaosPausedBySteadyState", at: "35m",
			series: map[string]string{`clusterops_chaos_acting{agent="shop/edmund",reason="Acting",` + inst + `}`: "1x40"}},

		"WorkloadUnrecovered": {alert: "ClusteropsChaosUnrecovered", at: "10m",
			series: map[string]string{`clusterops_chaos_unrecovered_total{agent="shop/edmund",namespace="shop",kind="Deployment",workload="web",` + inst + `}`: "0 0 0 1 1 1 1 1 1 1 1"},
			fire: []firing{{labels: map[string]string{"agent": "shop/edmund", "namespace": "shop", "kind": "Deployment", "workload": "web"},
				description: "Deployment shop/web did not recover within the recoveryTimeout of ChaosAgent shop/edmund after one of its actions " +
					"in the last hour: the agent's verdict on it is Unrecovered (status.atProvider.verdicts)."}}},
		"WorkloadsRecovered": {alert: "ClusteropsChaosUnrecovered", at: "10m",
			series: map[string]string{`clusterops_chaos_unrecovered_total{agent="shop/edmund",namespace="shop",kind="Deployment",workload="web",` + inst + `}`: "0x10"}},

		"ClusterUnreachable": {alert: "ClusteropsRemoteClusterUnreachable", at: "15m",
			series: map[string]string{
				`rest_client_requests_total{code="200",host="10.0.0.1:6443",method="GET",` + inst + `}`:     "0+100x5 500x15",
				`rest_client_requests_total{code="<error>",host="10.0.0.1:6443",method="GET",` + inst + `}`: "0x5 0+10x15",
				`rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET",` + inst + `}`:    "0+100x20",
			},
			fire: []firing{{labels: map[string]string{"instance": "provider:8080", "host": "10.0.0.1:6443"},
				description: "Every request of provider provider:8080 to the API server at 10.0.0.1:6443 has failed for 2m and more. " +
					"The managed resources whose ProviderConfig points there are Synced=False with \"cluster ... has been unreachable since ...\" " +
					"and retry; nothing they made is deleted."}}},
		"ClusterAnswersSome": {alert: "ClusteropsRemoteClusterUnreachable", at: "15m",
			series: map[string]string{
				`rest_client_requests_total{code="200",host="10.0.0.1:6443",method="GET",` + inst + `}`:     "0+100x20",
				`rest_client_requests_total{code="<error>",host="10.0.0.1:6443",method="GET",` + inst + `}`: "0+1x20",
			}},

		"ShardUnheld": {alert: "ClusteropsShardUnheld", at: "20m",
			series: map[string]string{
				`clusterops_shard_held{shard="0",instance="a:8080",job="provider-clusterops"}`: "1x30",
				`clusterops_shard_held{shard="1",instance="a:8080",job="provider-clusterops"}`: "1x5 0x25",
			},
			fire: []firing{{labels: map[string]string{"shard": "1"},
				description: "No replica of the provider has held the Lease of shard 1 for 5 minutes, so the managed resources " +
					"labelled crossplane.io/shard=1 are not reconciled."}}},
		"ShardHandedOver": {alert: "ClusteropsShardUnheld", at: "20m",
			series: map[string]string{
				`clusterops_shard_held{shard="0",instance="a:8080",job="provider-clusterops"}`: "1x30",
				`clusterops_shard_held{shard="1",instance="a:8080",job="provider-clusterops"}`: "1x5",
				`clusterops_shard_held{shard="1",instance="b:8080",job="provider-clusterops"}`: "_x5 1x25",
			}},

		"ReconcilesFail": {alert: "ClusteropsReconcileErrors", at: "25m",
			series: map[string]string{`controller_runtime_reconcile_errors_total{controller="providerconfig",` + inst + `}`: "0+5x30"},
			fire: []firing{{labels: map[string]string{"controller": "providerconfig"},
				description: "Controller providerconfig has returned reconcile errors for 15 minutes: the provider's log names each."}}},
		"ReconcilesSucceed": {alert: "ClusteropsReconcileErrors", at: "25m",
			series: map[string]string{`controller_runtime_reconcile_errors_total{controller="providerconfig",` + inst + `}`: "5x30"}},

		"NotSynced": {alert: "ClusteropsResourcesNotSynced", at: "20m",
			series: map[string]string{
				`crossplane_managed_resource_exists{gvk="` + copyGVK + `",` + inst + `}`: "5x30",
				`crossplane_managed_resource_synced{gvk="` + copyGVK + `",` + inst + `}`: "4x30",
			},
			fire: []firing{{labels: map[string]string{"gvk": copyGVK},
				description: "1 managed resource(s) of " + copyGVK + " have not been Synced for 15 minutes: their Synced=False condition " +
					"says why (a missing source, reach denied, an object in the way, an unreachable cluster), and a Warning event names each."}}},
		"AllSynced": {alert: "ClusteropsResourcesNotSynced", at: "20m",
			series: map[string]string{
				`crossplane_managed_resource_exists{gvk="` + copyGVK + `",` + inst + `}`: "5x30",
				`crossplane_managed_resource_synced{gvk="` + copyGVK + `",` + inst + `}`: "5x30",
			}},

		"QueueDeep": {alert: "ClusteropsWorkQueueBacklog", at: "20m",
			series: map[string]string{`workqueue_depth{controller="` + copyCtrl + `",name="` + copyCtrl + `",priority="0",` + inst + `}`: "2000x30"},
			fire: []firing{{labels: map[string]string{"controller": copyCtrl},
				description: "The work queue of controller " + copyCtrl + " holds 2000 requests: the provider reconciles more slowly than work arrives."}}},
		"QueueShallow": {alert: "ClusteropsWorkQueueBacklog", at: "20m",
			series: map[string]string{`workqueue_depth{controller="` + copyCtrl + `",name="` + copyCtrl + `",priority="0",` + inst + `}`: "10x30"}},

		"ChangesWait": {alert: "ClusteropsChangesWait", at: "25m",
			series: map[string]string{urgent("0.1", ""): "0x30", urgent("10", ""): "0x30", urgent("+Inf", ""): "0+10x30"},
			fire: []firing{{labels: map[string]string{"controller": copyCtrl},
				description: "For controller " + copyCtrl + ", one change in ten has waited 10 seconds or more in the queue for a worker " +
					"for 15 minutes: the controller's workers are all busy with routine work or retries."}}},
		"ChangesTakenAtOnce": {alert: "ClusteropsChangesWait", at: "25m",
			series: map[string]string{urgent("0.1", ""): "0+10x30", urgent("10", ""): "0+10x30", urgent("+Inf", ""): "0+10x30"}},

		"RequestsHeld": {alert: "ClusteropsRoutineRequestsHeld", at: "35m",
			series: map[string]string{`clusterops_api_routine_requests_waiting{` + inst + `}`: "5x40"},
			fire: []firing{{labels: map[string]string{"instance": "provider:8080"},
				description: "Provider provider:8080 has held 5 routine requests (new resources, polls, resyncs) at --max-routine-requests for 30 minutes."}}},
		"RequestsFlow": {alert: "ClusteropsRoutineRequestsHeld", at: "35m",
			series: map[string]string{`clusterops_api_routine_requests_waiting{` + inst + `}`: "0x40"}},
	}
}

// TestAlertsFireOnTheSeriesThatMeanThem runs each case through promtool test rules against the rules
// examples/monitoring ships: every alert fires on the series that mean it,
// with its labels and annotations, and on none of the healthy ones.
func TestAlertsFireOnTheSeriesThatMeanThem(t *testing.T) {
	tool := promtool(t)
	byName := map[string]alert{}
	for _, a := range alerts(defaultConfig()) {
		byName[a.name] = a
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	rules, err := filepath.Abs(filepath.Join(root, pathRules))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range ruleCases() {
		a, ok := byName[c.alert]
		if !ok {
			t.Fatalf("case %s: no alert %s", name, c.alert)
		}
		if len(c.fire) > 0 {
			fires[c.alert] = true
		} else {
			silent[c.alert] = true
		}
		t.Run(name, func(t *testing.T) {
			type series struct {
				Series string `json:"series"`
				Values string `json:"values"`
			}
			type expAlert struct {
				Labels      map[string]string `json:"exp_labels"`
				Annotations map[string]string `json:"exp_annotations"`
			}
			in := make([]series, 0, len(c.series))
			for s, v := range c.series {
				in = append(in, series{s, v})
			}
			exp := make([]expAlert, 0, len(c.fire))
			for _, f := range c.fire {
				l := map[string]string{"severity": a.severity}
				for k, v := range f.labels {
					l[k] = v
				}
				exp = append(exp, expAlert{Labels: l, Annotations: map[string]string{
					"summary": a.summary, "description": f.description, "runbook_url": runbookBase + anchor(a.name),
				}})
			}
			test := map[string]any{
				"rule_files":          []string{rules},
				"evaluation_interval": "1m",
				"tests": []any{map[string]any{
					"interval":        "1m",
					"input_series":    in,
					"alert_rule_test": []any{map[string]any{"eval_time": c.at, "alertname": c.alert, "exp_alerts": exp}},
				}},
			}
			b, err := yaml.Marshal(test)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(t.TempDir(), "test.yml")
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(tool, "test", "rules", f).CombinedOutput(); err != nil {
				t.Errorf("promtool test rules: %v\n%s\ntest file:\n%s", err, out, b)
			}
		})
	}
	for n := range byName {
		if !fires[n] || !silent[n] {
			t.Errorf("alert %s needs a case where it fires and one where it does not (fires: %t, silent: %t)", n, fires[n], silent[n])
		}
	}
}

// TestEveryAlertHasARunbook: docs/operations.md has a section for each
// alert, under the heading its runbook_url points at.
func TestEveryAlertHasARunbook(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts(defaultConfig()) {
		if !regexp.MustCompile(`(?m)^### ` + a.name + `$`).Match(b) {
			t.Errorf("docs/operations.md has no runbook section \"### %s\"", a.name)
		}
	}
}

// DashboardQueries returns the PromQL of every panel of the dashboard JSON,
// by panel title, with Grafana's $__rate_interval as it resolves it for a
// 15 s scrape (a minute).
func dashboardQueries(t *testing.T, b []byte) map[string][]string {
	t.Helper()
	type panel struct {
		Title   string  `json:"title"`
		Type    string  `json:"type"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				out[p.Title] = append(out[p.Title], strings.ReplaceAll(q.Expr, "$__rate_interval", "1m"))
			}
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboardQueriesParse parses every panel's query with Prometheus'
// parser; the e2e tier (TestAlertsFireOnARealPrometheus) runs them on a real Prometheus.
func TestDashboardQueriesParse(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, pathDashboard))
	if err != nil {
		t.Fatal(err)
	}
	qs := dashboardQueries(t, b)
	if len(qs) < 20 {
		t.Errorf("%d panels with queries, want the 20 and more of the dashboard", len(qs))
	}
	p := parser.NewParser(parser.Options{})
	for title, exprs := range qs {
		for _, e := range exprs {
			if _, err := p.ParseExpr(e); err != nil {
				t.Errorf("panel %q: %v\n%s", title, err, e)
			}
		}
	}
}
