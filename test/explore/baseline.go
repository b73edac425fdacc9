package explore

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// heapSlack is how far the heap may stay above its baseline once the
// replicas have stopped: what the explorer itself keeps of a sequence (its
// request log, the model) and the runtime's own rounding; a replica's caches
// of one world are a few MiB, so a manager left behind shows as goroutines
// first.
const heapSlack = 32 << 20

// A baseline is what the test process and the API server hold before a
// sequence starts its replicas: goroutines by where they started, the heap
// after a collection, and the watches the API server serves. Once teardown
// has stopped the replicas, each is back to it: a replica that leaves a
// goroutine, a watch or its caches behind would leak with every restart,
// join and leave.
type baseline struct {
	goroutines map[string][]string
	heap       uint64
	watches    map[string]float64
}

// takeBaseline reads the process and the API server now.
func (s *State) takeBaseline(ctx context.Context) error {
	select {
	case <-s.pods.watching:
	case <-ctx.Done():
		return errors.Wrap(ctx.Err(), "the watch of the ImmortalContainer's pods did not open")
	}
	w, err := s.api.Watches(ctx)
	if err != nil {
		return err
	}
	s.base = &baseline{goroutines: settledGoroutines(ctx), heap: heap(), watches: w}
	return nil
}

// settledGoroutines are the goroutines once their count holds for half a
// second, or after 10 s: those of the sequence before, winding down, would
// hide a leak of this one's.
func settledGoroutines(ctx context.Context) map[string][]string {
	count := func(g map[string][]string) (n int) {
		for _, s := range g {
			n += len(s)
		}
		return n
	}
	last := goroutines()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && sleep(ctx, 500*time.Millisecond) == nil {
		now := goroutines()
		if count(now) == count(last) {
			return now
		}
		last = now
	}
	return last
}

// baselines are the oracles of teardown, once the replicas have stopped.
func baselines() []oracle {
	return []oracle{
		{"goroutines return to their baseline", goroutinesBack},
		{"the API server's watches return to their baseline", watchesBack},
		{"the heap returns to its baseline", heapBack},
	}
}

// goroutinesBack: no place starts more goroutines than it had started at
// the baseline.
func goroutinesBack(_ context.Context, s *State) error {
	now := goroutines()
	var more []string
	for _, at := range slices.Sorted(maps.Keys(now)) {
		if n := len(now[at]) - len(s.base.goroutines[at]); n > 0 {
			more = append(more, fmt.Sprintf("%d more started by %s, such as\n%s", n, at, now[at][len(now[at])-1]))
		}
	}
	if len(more) > 0 {
		return errors.Errorf("goroutines left behind: %s", strings.Join(more, "; "))
	}
	return nil
}

// watchesBack: the API server serves no more watches of any resource than at
// the baseline.
func watchesBack(ctx context.Context, s *State) error {
	w, err := s.api.Watches(ctx)
	if err != nil {
		return err
	}
	var more []string
	for _, r := range slices.Sorted(maps.Keys(w)) {
		if w[r] > s.base.watches[r] {
			more = append(more, fmt.Sprintf("%s: %.0f, %.0f at the baseline", r, w[r], s.base.watches[r]))
		}
	}
	if len(more) > 0 {
		return errors.Errorf("the API server serves more watches: %s", strings.Join(more, "; "))
	}
	return nil
}

// heapBack: the heap after a collection is within heapSlack of its
// baseline.
func heapBack(_ context.Context, s *State) error {
	if h := heap(); h > s.base.heap+heapSlack {
		return errors.Errorf("the heap holds %d MiB after a collection, %d MiB at the baseline", h>>20, s.base.heap>>20)
	}
	return nil
}

// heap is the heap in use after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// goroutines are the process's goroutines' stacks by the function that
// started them, leaving out the loops of pooled HTTP connections (a stopped
// replica's stay open until the API server closes them, as any client's
// idle connections do) and what the testing package started, which runs
// subtests.
func goroutines() map[string][]string {
	idleLoops := []string{"net/http.(*persistConn).readLoop(", "net/http.(*persistConn).writeLoop(", "http2ClientConn).readLoop(", "http2.(*ClientConn).readLoop("}
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string][]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		stack := string(g)
		frames, created, _ := strings.Cut(stack, "\ncreated by ")
		// A stack ends with the function the goroutine runs and its file.
		lines := strings.Split(frames, "\n")
		if len(lines) > 2 && slices.ContainsFunc(idleLoops, func(f string) bool { return strings.Contains(lines[len(lines)-2], f) }) {
			continue
		}
		at := "the runtime"
		if created != "" {
			at, _, _ = strings.Cut(created, "\n")
			at, _, _ = strings.Cut(at, " in goroutine ")
		}
		if strings.HasPrefix(at, "testing.") {
			continue
		}
		out[at] = append(out[at], stack)
	}
	return out
}
