package process

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clusterops/provider-clusterops/internal/shard"
)

// TestFrozenReplicaWritesNothingOnThaw freezes (SIGSTOP) a sharded replica
// while a fleet-wide change is in flight, for longer than its Leases last:
// the other replica takes its shards and finishes the change. When the
// frozen replica goes on (SIGCONT), its fence (shard.Fence) says its Leases
// ran out by its own clock, so the writes its interrupted reconciles were
// about to make are not sent, and it rejoins without acting twice: every
// Deployment is rolled exactly once and every copy holds the new data.
func TestFrozenReplicaWritesNothingOnThaw(t *testing.T) {
	c := startCluster(t, false)
	a := c.shardedReplica(t, "a")
	shares(t, startup, a)
	b := c.shardedReplica(t, "b")
	owner := shares(t, takeover+startup, a, b)

	f := newWaveFleet(shardSize)
	f.create(t, c)
	f.record(c.waveConverge(t, f))

	f.change(t, c)
	victim := owner[shard.Of(shardSize.ns(0), shards)]
	rest := a
	if victim == a {
		rest = b
	}
	eventually(t, react, "the change to be under way", func(ctx context.Context) (bool, error) {
		done, err := c.waveDone(ctx, f)
		return done >= f.work()/10, err
	})
	signal(t, victim, syscall.SIGSTOP)
	frozen := time.Now()
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			signal(t, victim, syscall.SIGCONT)
		}
	})
	// Frozen until the other replica holds every shard.
	shares(t, shardTakeover, rest)
	t.Logf("replica %s's shards taken over %s after it was frozen", victim.name, time.Since(frozen).Round(time.Millisecond))
	signal(t, victim, syscall.SIGCONT)
	thawed = true

	eventually(t, settle, "every resource of the fleet as the change wants it", f.changed(t, c, f.bundlesAsWanted))
	// The thawed replica rejoins and the shards are shared again, without
	// any resource acted on twice (f.changed checks each Deployment rolled
	// once); the fleet stays as it is.
	shares(t, takeover+startup, a, b)
	stays(t, 5*time.Second, "the fleet as the change wants it after the thaw", f.changed(t, c, f.bundlesAsWanted))
	t.Logf("the thawed replica refused %d writes past its fence", fenced(t, c, victim))
}

// fenced counts the lines of p's log that say a write was not sent because
// its shard's Lease ran out by its clock.
func fenced(t *testing.T, c *cluster, p *provider) int {
	t.Helper()
	fh, err := os.Open(filepath.Join(c.logs, p.name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	n := 0
	s := bufio.NewScanner(fh)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		if strings.Contains(s.Text(), "past the renew deadline") {
			n++
		}
	}
	return n
}
