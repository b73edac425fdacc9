// Package local holds the scripts that run the provider on a local control plane; its tests check
// the demo's shell helpers (wait.sh) without a cluster, and, when asked with DEMO=1, run the demo.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runHelpers runs script in bash, as demo.sh does (set -euo pipefail), after sourcing wait.sh.
func runHelpers(t *testing.T, script string, env ...string) result {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash not found: the demo and every script under cluster/local need it")
	}
	// A hang is the bug under test; the guard turns it into a failure instead of a stuck test.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\nsource ./wait.sh\n"+script)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("bash did not end within 60s; stderr:\n%s", r.stderr)
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running bash: %v", err)
	}
	return r
}

func TestWaitForEndsAtItsBound(t *testing.T) {
	r := runHelpers(t, `wait_for 1 "the pod example-immortalcontainer-immortalpod was not recreated" false`)
	if r.code == 0 {
		t.Errorf("exit code 0, want non-zero")
	}
	if r.took < time.Second || r.took > 4*time.Second {
		t.Errorf("took %v, want about 1s", r.took)
	}
	if want := "demo: the pod example-immortalcontainer-immortalpod was not recreated within 1s"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q does not say %q", r.stderr, want)
	}
}

func TestWaitForReturnsWhenTheConditionHolds(t *testing.T) {
	// The condition holds on the third try.
	r := runHelpers(t, `n=0; third() { n=$((n + 1)); ((n >= 3)); }; wait_for 30 "never" third; echo "tries: $n"`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "tries: 3" || r.stderr != "" || r.took > 5*time.Second {
		t.Errorf("got exit code %d, stdout %q, stderr %q after %v; want 0, \"tries: 3\", nothing, quickly",
			r.code, r.stdout, r.stderr, r.took)
	}
}

func TestWaitForStopsWhenTheWatchedProcessDies(t *testing.T) {
	log := filepath.Join(t.TempDir(), "provider.log")
	var lines strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&lines, "log line %d\n", i)
	}
	if err := os.WriteFile(log, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// The process dies 0.3s into a 30s wait whose condition never holds.
	r := runHelpers(t, `(sleep 0.3; exit 3) &
watch_process provider $! "$LOG"
wait_for 30 "the pod example-immortalcontainer-immortalpod was not recreated" false`, "LOG="+log)
	if r.code == 0 {
		t.Errorf("exit code 0, want non-zero")
	}
	if r.took > 5*time.Second {
		t.Errorf("took %v, want well under the 30s bound", r.took)
	}
	died := regexp.MustCompile(`demo: the provider \(pid \d+\) exited, so the pod example-immortalcontainer-immortalpod was not recreated; last 20 lines of ` + regexp.QuoteMeta(log))
	if !died.MatchString(r.stderr) {
		t.Errorf("stderr %q does not match %q", r.stderr, died)
	}
	// The tail: lines 11 to 30, not line 10.
	if !strings.Contains(r.stderr, "log line 11\n") || !strings.HasSuffix(r.stderr, "log line 30\n") || strings.Contains(r.stderr, "log line 10\n") {
		t.Errorf("stderr %q does not end with the log's last 20 lines", r.stderr)
	}
}

// kcStub stands in for kubectl: it records its arguments and prints Ready's status True only
// for a get in namespace $READY_NS.
const kcStub = `kc() {
  echo "kc $*" >>"$CALLS"
  local args=" $* "
  if [[ -n "${READY_NS:-}" && "$args" == *" -n $READY_NS get "* && "$args" == *"-o jsonpath="* ]]; then echo True; fi
}
ready_timeout=1
`

func TestReadyOrFailUsesTheNamespaceItIsGiven(t *testing.T) {
	cases := []struct {
		name, args, ns string
	}{
		{name: "given", args: "copyrule copyrator default", ns: "default"},
		{name: "default", args: "immortalcontainer example-immortalcontainer", ns: "demo"},
	}
	for _, c := range cases {
		kind, name, _ := strings.Cut(c.args, " ")
		name, _, _ = strings.Cut(name, " ")
		t.Run(c.name+"/not ready", func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls")
			r := runHelpers(t, kcStub+"ready_or_fail "+c.args, "CALLS="+calls)
			if r.code == 0 {
				t.Errorf("exit code 0, want non-zero")
			}
			if want := fmt.Sprintf("demo: %s/%s in namespace %s was not Ready within 1s", kind, name, c.ns); !strings.Contains(r.stderr, want) {
				t.Errorf("stderr %q does not say %q", r.stderr, want)
			}
			checkNamespace(t, calls, c.ns)
		})
		t.Run(c.name+"/ready", func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls")
			r := runHelpers(t, kcStub+"ready_or_fail "+c.args, "CALLS="+calls, "READY_NS="+c.ns)
			if want := kind + "/" + name + " is Ready\n"; r.code != 0 || r.stdout != want {
				t.Errorf("got exit code %d, stdout %q, stderr %q; want 0 and %q", r.code, r.stdout, r.stderr, want)
			}
			checkNamespace(t, calls, c.ns)
		})
	}
}

// checkNamespace: every kubectl call recorded in calls was made in namespace ns.
func checkNamespace(t *testing.T, calls, ns string) {
	t.Helper()
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(call, " -n "+ns+" ") {
			t.Errorf("kubectl call %q is not in namespace %s", call, ns)
		}
	}
}

// The demo's own waits go through wait_for; a bare loop would bring the hang back.
func TestDemoHasNoUnboundedLoops(t *testing.T) {
	b, err := os.ReadFile("demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `source "$here/wait.sh"`) {
		t.Error("demo.sh does not source wait.sh")
	}
	loop := regexp.MustCompile(`(^|[;&|]\s*)(until|while)\s`)
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		// Reading a finite list is not a wait.
		if loop.MatchString(strings.TrimSpace(line)) && !strings.Contains(line, "while read") {
			t.Errorf("demo.sh:%d loops outside wait_for: %s", i+1, line)
		}
		if strings.Contains(line, "sleep ") {
			t.Errorf("demo.sh:%d sleeps outside wait_for: %s", i+1, line)
		}
	}
	if out, err := exec.Command("bash", "-n", "demo.sh").CombinedOutput(); err != nil {
		t.Errorf("bash -n demo.sh: %v\n%s", err, out)
	}
}

// TestDemoShowsEveryKindActing runs the demo as `make demo` does, on a local control plane it
// starts and stops (or one already up), and checks that it shows every kind acting: for the
// ChaosAgent, one pod evicted, named in the agent's status and in its event, deployment/victim
// Ready again with a new pod, the agent's verdict (Resilient after one disruption) and every
// agent's last round. It needs the control plane and takes about a minute, so it runs only when
// asked:
//
//	DEMO=1 go test ./cluster/local -run TestDemoShowsEveryKindActing -v
func TestDemoShowsEveryKindActing(t *testing.T) {
	if os.Getenv("DEMO") != "1" {
		t.Skip("runs the demo on a local control plane; DEMO=1 runs it")
	}
	// Leave the demo time to stop what it started before the test binary's own timeout.
	deadline := time.Now().Add(15 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-2 * time.Minute)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "./demo.sh")
	cmd.Env = append(os.Environ(), "KEEP=")
	// SIGTERM runs the demo's cleanup, which stops the provider and the control plane it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Minute
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	// say() prints its headings in bold.
	got := regexp.MustCompile("\033\\[[0-9;]*m").ReplaceAllString(out.String(), "")
	t.Logf("the demo took %v; its output:\n%s", time.Since(start).Round(time.Second), got)
	if err != nil {
		t.Fatalf("demo.sh: %v", err)
	}
	for _, c := range demoLines(t, got) {
		if !regexp.MustCompile(`(?m)` + c.line).MatchString(got) {
			t.Errorf("the demo did not show %s: no line matches %q", c.what, c.line)
		}
	}
}

// demoLines are the lines the demo prints of what each kind did; the ChaosAgent's name the pod it
// shows evicted.
func demoLines(t *testing.T, out string) []struct{ what, line string } {
	t.Helper()
	m := regexp.MustCompile(`(?m)^evicted pod (victim-[a-z0-9-]+) after \d+ ms$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal(`the demo did not show the pod ChaosAgent tantrum evicted: no line "evicted pod victim-... after N ms"`)
	}
	pod := regexp.QuoteMeta(m[1])
	return []struct{ what, line string }{
		{"ImmortalContainer replacing its deleted pod", `^new pod [0-9a-f-]{36} after \d+ ms$`},
		{"AppBundle reverting an edit", `^image restored to nginx:1\.21 after \d+ ms$`},
		{"ConfigRollout rolling on a change", `^new ReplicaSet after \d+ ms$`},
		{"CopyRule copying into a new namespace", `^copy in the new namespace after \d+ ms$`},
		{"deployment/victim whole before the agent", `^deployment/victim: 2/2 ready, pods victim-\S+ victim-\S+$`},
		{"the agent's event for the eviction", `^EvictPod\s+Evicted pod demo/` + pod + `$`},
		{"deployment/victim whole again with a new pod", `^deployment/victim: 2/2 ready again after \d+ ms; new pod victim-[a-z0-9-]+$`},
		{"the agent's verdict", `^verdict on Deployment demo/victim: Resilient, recovered from 1 of 1 disruptions, p50 [0-9.]+m?s, max [0-9.]+m?s$`},
		{"the agent's one round, which evicted the pod", `^demo\s+tantrum\s+1\s+Acting\s+evicted pod demo/` + pod + `(;.*)?$`},
		{"why the example agent princeedmund did nothing", `^demo\s+princeedmund\s+\S+\s+\S+\s+nothing happened: \S.*$`},
		{"why the example agent baldrick did nothing", `^chaos-playground\s+baldrick\s+\S+\s+\S+\s+nothing happened: \S.*$`},
		{"where the monitoring files are", `^alerts, a PodMonitor and a Grafana dashboard for a cluster's Prometheus: examples/monitoring/ \(docs/operations\.md#monitoring\)$`},
		{"the end", `^== Done$`},
	}
}
