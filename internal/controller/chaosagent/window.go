package chaosagent

import (
	"time"

	"github.com/clusterops/provider-clusterops/internal/window"
)

// A Window is a parsed quiet window. Quiet windows are read by
// internal/window, which ConfigRollout's rollout windows share.
type Window = window.Window

// ParseWindow parses a quiet window: weekday names, HH:MM times, an IANA time
// zone (UTC when empty).
var ParseWindow = window.Parse

// Quiet reports whether t is inside any of the windows, and when the last of
// the windows it is inside ends.
func Quiet(ws []Window, t time.Time) (bool, time.Time) { return window.Within(ws, t) }
