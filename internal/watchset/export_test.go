package watchset

import "context"

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
