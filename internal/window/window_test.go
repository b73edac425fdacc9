package window

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clusterops/provider-clusterops/apis/v1alpha1"
)

func TestWithinHoldsOnlyInsideAWindowOnItsDays(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// now is Monday 2026-03-02 12:00 UTC, 13:00 in Berlin.
	cases := map[string]struct {
		reason    string
		window    v1alpha1.TimeWindow
		at        time.Time
		wantQuiet bool
		wantUntil time.Time
	}{
		"Inside": {
			reason: "Inside a window on one of its days.",
			window: v1alpha1.TimeWindow{Days: []v1alpha1.Weekday{"Monday"}, Start: "09:00", End: "17:00"},
			at:     now, wantQuiet: true, wantUntil: time.Date(2026, 3, 2, 17, 0, 0, 0, time.UTC),
		},
		"OtherDay": {
			reason: "The same time on a day the window does not name.",
			window: v1alpha1.TimeWindow{Days: []v1alpha1.Weekday{"Tue", "Wed"}, Start: "09:00", End: "17:00"},
			at:     now,
		},
		"EveryDay": {
			reason: "No days means every day.",
			window: v1alpha1.TimeWindow{Start: "11:59", End: "12:01"},
			at:     now, wantQuiet: true, wantUntil: time.Date(2026, 3, 2, 12, 1, 0, 0, time.UTC),
		},
		"EndIsExclusive": {
			reason: "The window is closed at its end.",
			window: v1alpha1.TimeWindow{Start: "09:00", End: "12:00"},
			at:     now,
		},
		"TimeZone": {
			reason: "Times are read in the window's time zone: 12:30–13:30 in Berlin holds 12:00 UTC.",
			window: v1alpha1.TimeWindow{Start: "12:30", End: "13:30", TimeZone: "Europe/Berlin"},
			at:     now, wantQuiet: true, wantUntil: time.Date(2026, 3, 2, 13, 30, 0, 0, berlin),
		},
		"PastMidnight": {
			reason: "A Sunday night window still holds early on Monday.",
			window: v1alpha1.TimeWindow{Days: []v1alpha1.Weekday{"Sunday"}, Start: "22:00", End: "06:00"},
			at:     time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC), wantQuiet: true, wantUntil: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC),
		},
		"PastMidnightWrongDay": {
			reason: "A Monday night window does not hold early on Monday.",
			window: v1alpha1.TimeWindow{Days: []v1alpha1.Weekday{"Monday"}, Start: "22:00", End: "06:00"},
			at:     time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC),
		},
		"WholeDay": {
			reason: "An end equal to the start lasts a whole day from the start.",
			window: v1alpha1.TimeWindow{Days: []v1alpha1.Weekday{"Sat"}, Start: "00:00", End: "00:00"},
			at:     time.Date(2026, 3, 7, 23, 59, 0, 0, time.UTC), wantQuiet: true, wantUntil: time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w, err := Parse(tc.window)
			if err != nil {
				t.Fatal(err)
			}
			quiet, until := Within([]Window{w}, tc.at)
			if quiet != tc.wantQuiet || !until.Equal(tc.wantUntil) {
				t.Errorf("\n%s\nWithin(%v) = %t, %s; want %t, %s", tc.reason, tc.at, quiet, until, tc.wantQuiet, tc.wantUntil)
			}
		})
	}
}

func TestParseWindowErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		window v1alpha1.TimeWindow
		want   string
	}{
		"BadStart":    {reason: "Hours go to 23.", window: v1alpha1.TimeWindow{Start: "24:00", End: "01:00"}, want: `start: "24:00" is not a time of day as HH:MM`},
		"ShortEnd":    {reason: "Times have two-digit hours.", window: v1alpha1.TimeWindow{Start: "00:00", End: "1:00"}, want: `end: "1:00" is not a time of day as HH:MM`},
		"SignedTime":  {reason: "Signs are not digits.", window: v1alpha1.TimeWindow{Start: "+1:00", End: "01:00"}, want: `start: "+1:00" is not a time of day as HH:MM`},
		"UnknownZone": {reason: "Zones are IANA names.", window: v1alpha1.TimeWindow{Start: "00:00", End: "01:00", TimeZone: "Mars/Olympus"}, want: `time zone "Mars/Olympus" is not an IANA time zone name`},
		"ZonePath":    {reason: "A path is no zone.", window: v1alpha1.TimeWindow{Start: "00:00", End: "01:00", TimeZone: "../../etc/passwd"}, want: `time zone "../../etc/passwd" is not an IANA time zone name`},
		"BadDay":      {reason: "Days are weekday names.", window: v1alpha1.TimeWindow{Days: []v1alpha1.Weekday{"Someday"}, Start: "00:00", End: "01:00"}, want: `"Someday" is not a weekday such as Monday or Mon`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(tc.window)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nParse(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzWindow parses arbitrary windows: parsing never panics, a window that
// parses holds an instant only until a later end, at most a day away, and it
// opens next after the instant, within eight days, at a time it holds.
func FuzzWindow(f *testing.F) {
	f.Add("Monday", "09:00", "17:00", "UTC", int64(0))
	f.Add("Sun", "22:00", "06:00", "Europe/Berlin", int64(1772400000))
	f.Add("", "00:00", "00:00", "America/Argentina/Buenos_Aires", int64(-5))
	f.Add("Fri", "9:00", "25:61", "/etc/localtime", int64(1))
	f.Fuzz(func(t *testing.T, day, start, end, tz string, unix int64) {
		q := v1alpha1.TimeWindow{Start: start, End: end, TimeZone: tz}
		if day != "" {
			q.Days = []v1alpha1.Weekday{v1alpha1.Weekday(day)}
		}
		w, err := Parse(q)
		if err != nil {
			return
		}
		at := time.Unix(unix%(1<<34), 0)
		in, until := w.Contains(at)
		if in && (!until.After(at) || until.Sub(at) > 26*time.Hour) {
			t.Fatalf("window %+v holds %s until %s", q, at, until)
		}
		next := w.Next(at)
		if !next.After(at) || next.Sub(at) > 8*24*time.Hour+2*time.Hour {
			t.Fatalf("window %+v opens next at %s after %s", q, next, at)
		}
		if open, _ := w.Contains(next); !open {
			t.Fatalf("window %+v does not hold %s, when it opens", q, next)
		}
	})
}

// now is Monday 2026-03-02 12:00 UTC.
var now = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

func TestNextFindsWhenTheNextWindowOpens(t *testing.T) {
	cases := map[string]struct {
		reason  string
		windows []v1alpha1.TimeWindow
		at      time.Time
		want    time.Time
	}{
		"LaterToday": {
			reason:  "A window that opens later today opens today.",
			windows: []v1alpha1.TimeWindow{{Start: "22:00", End: "06:00"}},
			at:      now, want: time.Date(2026, 3, 2, 22, 0, 0, 0, time.UTC),
		},
		"Tomorrow": {
			reason:  "A window that opened today opens next tomorrow, even while open.",
			windows: []v1alpha1.TimeWindow{{Start: "09:00", End: "17:00"}},
			at:      now, want: time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC),
		},
		"NextNamedDay": {
			reason:  "Days the window does not name are skipped: Monday noon to Saturday.",
			windows: []v1alpha1.TimeWindow{{Days: []v1alpha1.Weekday{"Sat"}, Start: "02:00", End: "04:00"}},
			at:      now, want: time.Date(2026, 3, 7, 2, 0, 0, 0, time.UTC),
		},
		"SameDayNextWeek": {
			reason:  "A window on today's weekday that opened already opens next a week later.",
			windows: []v1alpha1.TimeWindow{{Days: []v1alpha1.Weekday{"Monday"}, Start: "11:00", End: "11:30"}},
			at:      now, want: time.Date(2026, 3, 9, 11, 0, 0, 0, time.UTC),
		},
		"Earliest": {
			reason:  "Of several windows the earliest opening counts.",
			windows: []v1alpha1.TimeWindow{{Start: "20:00", End: "21:00"}, {Start: "12:30", End: "13:00", TimeZone: "Europe/Berlin"}, {Start: "18:00", End: "19:00"}},
			at:      now, want: time.Date(2026, 3, 2, 18, 0, 0, 0, time.UTC),
		},
		"None": {
			reason: "No windows never open.",
			at:     now,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws, err := ParseAll("windows", tc.windows)
			if err != nil {
				t.Fatal(err)
			}
			if got := Next(ws, tc.at); !got.Equal(tc.want) {
				t.Errorf("\n%s\nNext(%v) = %s; want %s", tc.reason, tc.at, got, tc.want)
			}
		})
	}
}

func TestParseAll(t *testing.T) {
	_, err := ParseAll("windows", []v1alpha1.TimeWindow{{Start: "09:00", End: "17:00"}, {Start: "nine", End: "17:00"}})
	want := `windows[1] is invalid: start: "nine" is not a time of day as HH:MM`
	if err == nil || err.Error() != want {
		t.Errorf("ParseAll(...) = %v; want %s", err, want)
	}
}
