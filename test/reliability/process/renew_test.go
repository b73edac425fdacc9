package process

import (
	"context"
	"io"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A link is a TCP proxy between one provider and the API server, which the
// test can cut: the provider alone loses its API server, while the API server
// and every other client carry on.
type link struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func newLink(t *testing.T, target string) *link {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &link{l: l, target: target}
	t.Cleanup(func() { _ = l.Close(); k.cutNow() })
	go k.serve()
	return k
}

func (k *link) serve() {
	for {
		in, err := k.l.Accept()
		if err != nil {
			return
		}
		k.mu.Lock()
		if k.cut {
			k.mu.Unlock()
			_ = in.Close()
			continue
		}
		out, err := net.Dial("tcp", k.target)
		if err != nil {
			k.mu.Unlock()
			_ = in.Close()
			continue
		}
		k.conns = append(k.conns, in, out)
		k.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// cutNow closes every connection the link carries and refuses new ones.
func (k *link) cutNow() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut = true
	for _, c := range k.conns {
		_ = c.Close()
	}
	k.conns = nil
}

// kubeconfigVia writes a kubeconfig of the cluster whose server is reached
// through the link (same certificate: it names the host, not the port).
func (c *cluster) kubeconfigVia(t *testing.T, k *link) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = k.l.Addr().String()
		cl.Server = u.String()
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// exited is the longest a leader cut off from its API server may take to
// exit: its renewals stop at the cut, the one due next starts at most a retry
// period later and gives up after the renew deadline; then the process stops
// its controllers. The test allows 3s for that and for timers that fire late
// on a loaded machine.
var exited = retryPeriod + renewDeadline + 3*time.Second

// TestLeaderPastRenewDeadlineExits runs a leader whose API server becomes
// unreachable, for it alone, for longer than --leader-election-renew-deadline,
// and a second replica that still reaches the API server. The leader exits,
// with a non-zero status and "leader election lost", within the renew
// deadline and a retry period of the cut (exited); the other replica leads
// only once it has (two never lead at once), and within takeover of the cut.
func TestLeaderPastRenewDeadlineExits(t *testing.T) {
	c := startCluster(t, false)
	host, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	k := newLink(t, host.Host)
	leader := c.runProviderWith(t, "cut", c.kubeconfigVia(t, k), replicaArgs()...)
	waitLeader(t, leader, time.Now(), startup)
	follower := c.replica(t, "b")
	waitCampaigning(t, follower)

	cut := time.Now()
	k.cutNow()
	t.Logf("cut leader %s off its API server", leader.name)
	// Until the leader exits, the follower must not lead.
	eventually(t, exited, "leader "+leader.name+" to exit, past its renew deadline ("+renewDeadline.String()+")", func(ctx context.Context) (bool, error) {
		if !leader.Running() {
			return true, nil
		}
		if ok, err := follower.leading(ctx); ok && leader.Running() {
			t.Fatalf("replica %s leads while leader %s, cut off, still runs: two lead at once", follower.name, leader.name)
		} else if err != nil {
			return false, err
		}
		return false, nil
	})
	gone := time.Since(cut)
	t.Logf("leader %s exited %s after the cut (bound %s): %v", leader.name, gone.Round(time.Millisecond), exited, leader.ExitErr())
	var ee *exec.ExitError
	if err := leader.ExitErr(); !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Errorf("leader %s ended with %v, want a non-zero exit status", leader.name, err)
	}
	if log := leader.LogTail(20); !strings.Contains(log, "leader election lost") {
		t.Errorf("leader %s's log does not say it lost the election:\n%s", leader.name, log)
	}
	waitLeader(t, follower, cut, takeover)
}
