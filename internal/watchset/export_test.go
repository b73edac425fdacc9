package watchset

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// SetStartHook makes f run as each watch of s starts, with the watch's
// context; an error from f fails that start. Tests use it to make a start fail
// and to see that a watch's informer was stopped.
func SetStartHook(s *Set, f func(ctx context.Context, w Watch) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startHook = f
}

// SetCoalesceAbove makes groups of name watches of s share one informer once
// they hold more than n names.
func SetCoalesceAbove(s *Set, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.coalesceAbove = n
}

// Len returns how many informers are running: the API-server watches the Set
// holds, a group's coalesced one counting once for all its names.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches) + len(s.coalesced) + len(s.wide)
}

// Synced reports whether every watch owner needs has listed its objects, so
// that a change from now on is sure to bring an event.
func (s *Set) Synced(owner types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.owners[owner] {
		// A watch nothing serves will never sync; never dereference it.
		if r, ok := s.serving(h.Value()); !ok || !r.synced {
			return false
		}
	}
	return true
}

// WaitSynced polls until every watch of owner has synced or ctx ends; tests that
// must not miss the next change use it.
func (s *Set) WaitSynced(ctx context.Context, owner types.NamespacedName) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !s.Synced(owner) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// SetWideAbove makes a family of groups of s share one wide informer once
// they span more than n namespaces, and narrow again below n/2.
func SetWideAbove(s *Set, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wideAbove = n
}
