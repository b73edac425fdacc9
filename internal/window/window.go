// Package window parses and evaluates time windows (apis/v1alpha1.TimeWindow):
// ChaosAgent's quiet windows, when it does nothing, and ConfigRollout's
// rollout windows, the only times it starts rolling a workload. Both kinds
// read a window the same way because they share this code.
package window

import (
	"fmt"
	"strings"
	"time"
	// The provider runs from a distroless image without a zone database.
	_ "time/tzdata"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

const minutesPerDay = 24 * 60

// A Window is a parsed time window.
type Window struct {
	// Days the window starts on; nil means every day.
	Days map[time.Weekday]bool
	// Start and End are minutes after midnight.
	Start, End int
	Loc        *time.Location
}

var weekdays = map[string]time.Weekday{
	"Sunday": time.Sunday, "Monday": time.Monday, "Tuesday": time.Tuesday, "Wednesday": time.Wednesday,
	"Thursday": time.Thursday, "Friday": time.Friday, "Saturday": time.Saturday,
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// Parse parses a window: weekday names, HH:MM times, an IANA time zone (UTC
// when empty).
func Parse(q v1alpha1.TimeWindow) (Window, error) {
	w := Window{}
	var err error
	if w.Start, err = clock(q.Start); err != nil {
		return w, errors.Wrap(err, "start")
	}
	if w.End, err = clock(q.End); err != nil {
		return w, errors.Wrap(err, "end")
	}
	tz := q.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	// LoadLocation also reads files: only names shaped like zone names get there.
	if strings.HasPrefix(tz, "/") || strings.Contains(tz, "..") || strings.Contains(tz, "\\") {
		return w, errors.Errorf("time zone %q is not an IANA time zone name", tz)
	}
	if w.Loc, err = time.LoadLocation(tz); err != nil {
		return w, errors.Errorf("time zone %q is not an IANA time zone name", tz)
	}
	for _, d := range q.Days {
		wd, ok := weekdays[string(d)]
		if !ok {
			return w, errors.Errorf("%q is not a weekday such as Monday or Mon", d)
		}
		if w.Days == nil {
			w.Days = map[time.Weekday]bool{}
		}
		w.Days[wd] = true
	}
	return w, nil
}

// ParseAll parses every window, naming the field and index of the first that
// does not parse (e.g. "quietWindows[1] is invalid: ...").
func ParseAll(field string, qs []v1alpha1.TimeWindow) ([]Window, error) {
	out := make([]Window, 0, len(qs))
	for i, q := range qs {
		w, err := Parse(q)
		if err != nil {
			return nil, errors.Wrapf(err, "%s[%d] is invalid", field, i)
		}
		out = append(out, w)
	}
	return out, nil
}

// clock parses HH:MM into minutes after midnight.
func clock(s string) (int, error) {
	var h, m int
	if len(s) != 5 || s[2] != ':' {
		return 0, errors.Errorf("%q is not a time of day as HH:MM", s)
	}
	if _, err := fmt.Sscanf(s, "%02d:%02d", &h, &m); err != nil || h < 0 || h > 23 || m < 0 || m > 59 {
		return 0, errors.Errorf("%q is not a time of day as HH:MM", s)
	}
	for _, c := range s[:2] + s[3:] {
		if c < '0' || c > '9' {
			return 0, errors.Errorf("%q is not a time of day as HH:MM", s)
		}
	}
	return h*60 + m, nil
}

// length of the window in minutes: an end at or before the start runs into
// the next day, an end equal to the start lasts a whole day.
func (w Window) length() int {
	l := (w.End - w.Start + minutesPerDay) % minutesPerDay
	if l == 0 {
		return minutesPerDay
	}
	return l
}

// opening is the window's opening on the calendar day of lt (in w.Loc), and
// its closing, when the window opens that day.
func (w Window) opening(y int, m time.Month, d int) (time.Time, time.Time, bool) {
	opens := time.Date(y, m, d, w.Start/60, w.Start%60, 0, 0, w.Loc)
	if w.Days != nil && !w.Days[opens.Weekday()] {
		return time.Time{}, time.Time{}, false
	}
	endMin := w.Start + w.length()
	return opens, time.Date(y, m, d, endMin/60, endMin%60, 0, 0, w.Loc), true
}

// Contains reports whether t is inside the window, and if so when it ends.
func (w Window) Contains(t time.Time) (bool, time.Time) {
	lt := t.In(w.Loc)
	// A window that opened yesterday may still be open.
	for _, back := range []int{0, 1} {
		opens, closes, ok := w.opening(lt.AddDate(0, 0, -back).Date())
		if ok && !lt.Before(opens) && lt.Before(closes) {
			return true, closes
		}
	}
	return false, time.Time{}
}

// Next is the first time after t at which the window opens; a week holds
// every day the window may name, so a window always opens within eight days.
func (w Window) Next(t time.Time) time.Time {
	lt := t.In(w.Loc)
	for ahead := 0; ahead <= 8; ahead++ {
		opens, _, ok := w.opening(lt.AddDate(0, 0, ahead).Date())
		if ok && opens.After(t) {
			return opens
		}
	}
	return time.Time{}
}

// Within reports whether t is inside any of the windows, and when the last
// of the windows it is inside ends.
func Within(ws []Window, t time.Time) (bool, time.Time) {
	in, until := false, time.Time{}
	for _, w := range ws {
		if ok, end := w.Contains(t); ok {
			in = true
			if end.After(until) {
				until = end
			}
		}
	}
	return in, until
}

// Next is the first time after t at which any of the windows opens, or the
// zero time when there are none.
func Next(ws []Window, t time.Time) time.Time {
	var next time.Time
	for _, w := range ws {
		if n := w.Next(t); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next
}
