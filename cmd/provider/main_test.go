package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clusterops/provider-clusterops/internal/provider"
)

func TestParseGivesTheDocumentedDefaults(t *testing.T) {
	defaults := options{
		poll: 10 * time.Minute, pollJitter: 10, sync: time.Hour, maxReconcileRate: 100, maxRoutineRequests: 32, quietRoutineRequests: 8, enableManagementPolicies: true,
		safeStart: true, namespace: "crossplane-system", metricsAddr: ":8080", healthAddr: ":8081", pprofAddr: "0",
		leaseDuration: time.Minute, renewDeadline: 50 * time.Second, retryPeriod: 2 * time.Second,
		changeLogsSocketPath: "/var/run/changelogs/changelogs.sock",
	}
	type want struct {
		o   options
		err string
	}
	cases := map[string]struct {
		reason string
		args   []string
		want   want
	}{
		"Defaults": {
			reason: "No flags give the documented defaults.",
			want:   want{o: defaults},
		},
		"AllFlags": {
			reason: "Every flag is read.",
			args: []string{"--debug", "--poll=30s", "--poll-jitter-percentage=25", "--sync=2h", "--max-reconcile-rate=50", "--max-routine-requests=0", "--quiet-routine-requests=4", "--leader-election",
				"--enable-management-policies=false", "--safe-start=false", "--namespace=ops", "--metrics-bind-address=:9090", "--health-probe-bind-address=0", "--pprof-bind-address=127.0.0.1:6060",
				"--leader-election-lease-duration=8s", "--leader-election-renew-deadline=6s", "--leader-election-retry-period=1s",
				"--enable-changelogs", "--changelogs-socket-path=/run/cl.sock"},
			want: want{o: options{debug: true, poll: 30 * time.Second, pollJitter: 25, sync: 2 * time.Hour, maxReconcileRate: 50, quietRoutineRequests: 4, leaderElection: true,
				namespace: "ops", metricsAddr: ":9090", healthAddr: "0", pprofAddr: "127.0.0.1:6060",
				leaseDuration: 8 * time.Second, renewDeadline: 6 * time.Second, retryPeriod: time.Second,
				enableChangeLogs: true, changeLogsSocketPath: "/run/cl.sock"}},
		},
		"ChangeLogsWithoutSocket": {
			reason: "Change logs need a socket to send to: refused without one.",
			args:   []string{"--enable-changelogs", "--changelogs-socket-path="},
			want: want{o: func() options { o := defaults; o.enableChangeLogs, o.changeLogsSocketPath = true, ""; return o }(),
				err: "--enable-changelogs needs a --changelogs-socket-path"},
		},
		"RenewDeadlineNotBelowLease": {
			reason: "A leader that may renew for as long as its lease lasts can lose the lease while it still acts: refused.",
			args:   []string{"--leader-election-lease-duration=10s", "--leader-election-renew-deadline=10s"},
			want: want{o: func() options {
				o := defaults
				o.leaseDuration, o.renewDeadline = 10*time.Second, 10*time.Second
				return o
			}(),
				err: "leader election needs --leader-election-lease-duration > --leader-election-renew-deadline > 1.2 × --leader-election-retry-period > 0"},
		},
		"RetryPeriodTooLong": {
			reason: "client-go needs the renew deadline above 1.2 retry periods: refused when parsing, not when the election starts.",
			args:   []string{"--leader-election-renew-deadline=5s", "--leader-election-retry-period=5s"},
			want: want{o: func() options { o := defaults; o.renewDeadline, o.retryPeriod = 5*time.Second, 5*time.Second; return o }(),
				err: "leader election needs --leader-election-lease-duration > --leader-election-renew-deadline > 1.2 × --leader-election-retry-period > 0"},
		},
		"ZeroPoll": {
			reason: "A zero poll interval would poll in a hot loop: refused.",
			args:   []string{"--poll=0s"},
			want:   want{o: func() options { o := defaults; o.poll = 0; return o }(), err: "--poll, --sync and --max-reconcile-rate must be positive"},
		},
		"NegativeRoutineRequests": {
			reason: "A negative bound on requests in flight means nothing: refused (0 is no bound).",
			args:   []string{"--max-routine-requests=-1"},
			want:   want{o: func() options { o := defaults; o.maxRoutineRequests = -1; return o }(), err: "--max-routine-requests and --quiet-routine-requests must not be negative"},
		},
		"JitterAboveHundred": {
			reason: "A spread above 100% would make polls due in the past: refused.",
			args:   []string{"--poll-jitter-percentage=101"},
			want:   want{o: func() options { o := defaults; o.pollJitter = 101; return o }(), err: "--poll-jitter-percentage must be between 0 and 100"},
		},
		"NegativeJitter": {
			reason: "A negative spread means nothing: refused.",
			args:   []string{"--poll-jitter-percentage=-1"},
			want:   want{o: func() options { o := defaults; o.pollJitter = -1; return o }(), err: "--poll-jitter-percentage must be between 0 and 100"},
		},
		"UnknownFlag": {
			reason: "An unknown flag is an error, not ignored.",
			args:   []string{"--pol=1m"},
			want:   want{o: defaults, err: "flag provided but not defined: -pol"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", "")
			o, err := parse(tc.args)
			got := want{o: o}
			if err != nil {
				got.err = err.Error()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}, options{})); diff != "" {
				t.Errorf("\n%s\nparse(%v): -want, +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}

// TestFlagDefaultsAreDefaultOptions: a provider started without flags runs
// with provider.DefaultOptions, which the test harness starts from too.
func TestFlagDefaultsAreDefaultOptions(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	o, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(provider.DefaultOptions(), providerOptions(o, nil, nil), cmpopts.IgnoreUnexported(provider.Options{})); diff != "" {
		t.Errorf("the flags' defaults are not provider.DefaultOptions: -want, +got:\n%s", diff)
	}
}

// TestFlagTable: docs/operations.md's flag table lists every flag with its
// default, and nothing else.
func TestFlagTable(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `--([a-z-]+)` \\| ([^|]+) \\|")
	documented := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(l); m != nil {
			documented[m[1]] = strings.TrimSpace(m[2])
		}
	}
	fs := flags(&options{})
	fs.VisitAll(func(f *flag.Flag) {
		doc, ok := documented[f.Name]
		delete(documented, f.Name)
		if !ok {
			t.Errorf("--%s is not in docs/operations.md's flag table", f.Name)
			return
		}
		doc = strings.TrimSpace(strings.TrimSuffix(strings.ReplaceAll(doc, "`", ""), "(off)"))
		same := doc == f.DefValue || strings.HasSuffix(doc, " or "+f.DefValue)
		if d1, err1 := time.ParseDuration(doc); err1 == nil {
			d2, err2 := time.ParseDuration(f.DefValue)
			same = err2 == nil && d1 == d2
		}
		if !same {
			t.Errorf("docs/operations.md gives --%s default %q, the flag's is %q", f.Name, doc, f.DefValue)
		}
	})
	for name := range documented {
		t.Errorf("docs/operations.md documents --%s, which is no flag", name)
	}
}
