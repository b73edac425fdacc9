package chaosagent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
)

func TestQuietWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// now is Monday 2026-03-02 12:00 UTC, 13:00 in Berlin.
	cases := map[string]struct {
		reason    string
		window    v1alpha1.QuietWindow
		at        time.Time
		wantQuiet bool
		wantUntil time.Time
	}{
		"Inside": {
			reason: "Inside a window on one of its days.",
			window: v1alpha1.QuietWindow{Days: []v1alpha1.Weekday{"Monday"}, Start: "09:00", End: "17:00"},
			at:     now, wantQuiet: true, wantUntil: time.Date(2026, 3, 2, 17, 0, 0, 0, time.UTC),
		},
		"OtherDay": {
			reason: "The same time on a day the window does not name.",
			window: v1alpha1.QuietWindow{Days: []v1alpha1.Weekday{"Tue", "Wed"}, Start: "09:00", End: "17:00"},
			at:     now,
		},
		"EveryDay": {
			reason: "No days means every day.",
			window: v1alpha1.QuietWindow{Start: "11:59", End: "12:01"},
			at:     now, wantQuiet: true, wantUntil: time.Date(2026, 3, 2, 12, 1, 0, 0, time.UTC),
		},
		"EndIsExclusive": {
			reason: "The window is closed at its end.",
			window: v1alpha1.QuietWindow{Start: "09:00", End: "12:00"},
			at:     now,
		},
		"TimeZone": {
			reason: "Times are read in the window's time zone: 12:30–13:30 in Berlin holds 12:00 UTC.",
			window: v1alpha1.QuietWindow{Start: "12:30", End: "13:30", TimeZone: "Europe/Berlin"},
			at:     now, wantQuiet: true, wantUntil: time.Date(2026, 3, 2, 13, 30, 0, 0, berlin),
		},
		"PastMidnight": {
			reason: "A Sunday night window still holds early on Monday.",
			window: v1alpha1.QuietWindow{Days: []v1alpha1.Weekday{"Sunday"}, Start: "22:00", End: "06:00"},
			at:     time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC), wantQuiet: true, wantUntil: time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC),
		},
		"PastMidnightWrongDay": {
			reason: "A Monday night window does not hold early on Monday.",
			window: v1alpha1.QuietWindow{Days: []v1alpha1.Weekday{"Monday"}, Start: "22:00", End: "06:00"},
			at:     time.Date(2026, 3, 2, 5, 0, 0, 0, time.UTC),
		},
		"WholeDay": {
			reason: "An end equal to the start lasts a whole day from the start.",
			window: v1alpha1.QuietWindow{Days: []v1alpha1.Weekday{"Sat"}, Start: "00:00", End: "00:00"},
			at:     time.Date(2026, 3, 7, 23, 59, 0, 0, time.UTC), wantQuiet: true, wantUntil: time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w, err := ParseWindow(tc.window)
			if err != nil {
				t.Fatal(err)
			}
			quiet, until := Quiet([]Window{w}, tc.at)
			if quiet != tc.wantQuiet || !until.Equal(tc.wantUntil) {
				t.Errorf("\n%s\nQuiet(%v) = %t, %s; want %t, %s", tc.reason, tc.at, quiet, until, tc.wantQuiet, tc.wantUntil)
			}
		})
	}
}

func TestParseWindowErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		window v1alpha1.QuietWindow
		want   string
	}{
		"BadStart":    {reason: "Hours go to 23.", window: v1alpha1.QuietWindow{Start: "24:00", End: "01:00"}, want: `start: "24:00" is not a time of day as HH:MM`},
		"ShortEnd":    {reason: "Times have two-digit hours.", window: v1alpha1.QuietWindow{Start: "00:00", End: "1:00"}, want: `end: "1:00" is not a time of day as HH:MM`},
		"SignedTime":  {reason: "Signs are not digits.", window: v1alpha1.QuietWindow{Start: "+1:00", End: "01:00"}, want: `start: "+1:00" is not a time of day as HH:MM`},
		"UnknownZone": {reason: "Zones are IANA names.", window: v1alpha1.QuietWindow{Start: "00:00", End: "01:00", TimeZone: "Mars/Olympus"}, want: `time zone "Mars/Olympus" is not an IANA time zone name`},
		"ZonePath":    {reason: "A path is no zone.", window: v1alpha1.QuietWindow{Start: "00:00", End: "01:00", TimeZone: "../../etc/passwd"}, want: `time zone "../../etc/passwd" is not an IANA time zone name`},
		"BadDay":      {reason: "Days are weekday names.", window: v1alpha1.QuietWindow{Days: []v1alpha1.Weekday{"Someday"}, Start: "00:00", End: "01:00"}, want: `"Someday" is not a weekday such as Monday or Mon`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseWindow(tc.window)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("\n%s\nParseWindow(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// FuzzQuietWindow parses arbitrary windows: parsing never panics, and a
// window that parses holds an instant only until a later end, at most a day
// away.
func FuzzQuietWindow(f *testing.F) {
	f.Add("Monday", "09:00", "17:00", "UTC", int64(0))
	f.Add("Sun", "22:00", "06:00", "Europe/Berlin", int64(1772400000))
	f.Add("", "00:00", "00:00", "America/Argentina/Buenos_Aires", int64(-5))
	f.Add("Fri", "9:00", "25:61", "/etc/localtime", int64(1))
	f.Fuzz(func(t *testing.T, day, start, end, tz string, unix int64) {
		q := v1alpha1.QuietWindow{Start: start, End: end, TimeZone: tz}
		if day != "" {
			q.Days = []v1alpha1.Weekday{v1alpha1.Weekday(day)}
		}
		w, err := ParseWindow(q)
		if err != nil {
			return
		}
		at := time.Unix(unix%(1<<34), 0)
		in, until := w.Contains(at)
		if in && (!until.After(at) || until.Sub(at) > 26*time.Hour) {
			t.Fatalf("window %+v holds %s until %s", q, at, until)
		}
	})
}
