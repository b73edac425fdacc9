package configrollout

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/shard"
)

// A wave's intent is durable: every change of the configuration rolls each
// workload that reads it once, whichever replica holds the rollout and
// however often it restarts. Before its first write to a workload, Update
// records the wave it is about to roll in status.atProvider.wave (intend),
// with one status update at the resourceVersion the reconcile read. A
// reconcile that read the rollout before another replica's wave, or before
// its own last one, meets a conflict there and rolls nothing. The managed
// reconciler's status update at the end of the reconcile goes out at the
// version that update answered with, so the two do not conflict, and
// clears the wave (Update sets it to nil once it has written every
// workload). A wave still recorded was cut short, by a SIGKILL, a restart
// or a hand-over: the next reconcile rolls what it holds that does
// not carry its hash yet (resumed), counts the rest as rolled when the wave
// was recorded (waveAt), and records nothing again (recorded). A wave of
// another hash than the current one is over (keepWave). TestIntendRecordsAWaveBeforeRollingIt,
// TestResumeWave and TestConfigRolloutWaveResumes
// (test/integration/configrollout_wave_test.go) hold this.

const errIntend = "cannot record the wave of workloads to roll: rolling none of them"

// waveKeys are the "Kind/name" of a wave's workloads, with the hash each is
// rolled to; nil when no wave of hash all is recorded.
func waveKeys(w *v1alpha1.RolloutWave, all string) map[string]string {
	if w == nil || w.Hash != all {
		return nil
	}
	out := make(map[string]string, len(w.Workloads))
	for _, x := range w.Workloads {
		h := x.Hash
		if h == "" {
			h = w.Hash
		}
		out[workloadKey(x.Kind, x.Name)] = h
	}
	return out
}

// keepWave drops the recorded wave once it is over: superseded by a change
// of the configuration, or with none of its workloads left to roll
// (pending holds the "Kind/name" of those that do not carry their hash).
func keepWave(o *v1alpha1.ConfigRolloutObservation, pending map[string]bool) {
	for k := range waveKeys(o.Wave, o.Hash) {
		if pending[k] {
			return
		}
	}
	o.Wave = nil
}

// waveAt is when the recorded wave rolled workload key to want, or nil when
// no wave of the current configuration holds it.
func waveAt(o *v1alpha1.ConfigRolloutObservation, key, want string) *metav1.Time {
	if h, ok := waveKeys(o.Wave, o.Hash)[key]; ok && h == want {
		t := o.Wave.At
		return &t
	}
	return nil
}

// resumed are the candidates of a wave cut short that are still to roll:
// those the recorded wave holds that are pending and that the rollout
// limit does not hold back now, in rollout order. A halted rollout resumes
// nothing: the workload past its deadline says the configuration breaks
// pods.
func resumed(w *v1alpha1.RolloutWave, all string, wv Wave, now time.Time) []Candidate {
	keys := waveKeys(w, all)
	if len(keys) == 0 || wv.Halted != nil {
		return nil
	}
	var out []Candidate
	for _, c := range wv.Pending {
		if _, ok := keys[c.Key()]; ok && (c.HeldUntil == nil || !c.HeldUntil.After(now)) {
			out = append(out, c)
		}
	}
	return out
}

// recorded reports whether the recorded wave of hash all holds every
// workload of roll at its hash: a wave resumed, whose intent is durable
// already.
func recorded(w *v1alpha1.RolloutWave, all string, roll []v1alpha1.WaveWorkload) bool {
	keys := waveKeys(w, all)
	for _, x := range roll {
		if h, ok := keys[workloadKey(x.Kind, x.Name)]; !ok || h != x.Hash {
			return false
		}
	}
	return true
}

// toRoll are the workloads Update rolls now, in status order, each with the
// hash it is rolled to.
func (e *external) toRoll(o *v1alpha1.ConfigRolloutObservation) []v1alpha1.WaveWorkload {
	var out []v1alpha1.WaveWorkload
	for _, w := range o.Workloads {
		want := e.wanted(w.Kind, w.Name, o.Hash)
		if upToDate(w.Hash, want, o.Hash) || !e.mayRoll(w.Kind, w.Name) {
			continue
		}
		out = append(out, v1alpha1.WaveWorkload{Kind: w.Kind, Name: w.Name, Hash: want})
	}
	return out
}

// intend records the wave roll in the rollout's status, at the
// resourceVersion cr carries, unless that wave is recorded already. The
// API server's answer, the rollout at its new resourceVersion, is decoded
// into cr, so the managed reconciler's status update that ends the
// reconcile goes out at that version. Nothing may be rolled unless it
// returns nil. Without a status writer (unit tests) nothing is recorded.
func (e *external) intend(ctx context.Context, cr *v1alpha1.ConfigRollout, roll []v1alpha1.WaveWorkload) error {
	o := &cr.Status.AtProvider
	if len(roll) == 0 || e.status == nil || recorded(o.Wave, o.Hash, roll) {
		return nil
	}
	// A replica whose Lease on the rollout's shard ran out records no wave:
	// it would roll none of it (the target's writes are fenced too).
	if err := shard.CheckWrite(ctx); err != nil {
		return errors.Wrap(err, errIntend)
	}
	w := &v1alpha1.RolloutWave{Hash: o.Hash, At: metav1.NewTime(e.now().Truncate(time.Second)), Workloads: make([]v1alpha1.WaveWorkload, 0, len(roll))}
	for _, x := range roll {
		if x.Hash == o.Hash {
			x.Hash = ""
		}
		w.Workloads = append(w.Workloads, x)
	}
	prev := o.Wave
	o.Wave = w
	if err := e.status.Update(ctx, cr); err != nil {
		cr.Status.AtProvider.Wave = prev
		return errors.Wrap(err, errIntend)
	}
	return nil
}
