package watchset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStrategyFor holds strategyFor's hysteresis: wide past the threshold,
// narrow below half of it, unchanged between.
func TestStrategyFor(t *testing.T) {
	type args struct {
		now        strategy
		namespaces int
		above      int
	}
	cases := map[string]struct {
		reason string
		args   args
		want   strategy
	}{
		"FewStayNarrow":      {reason: "Up to the threshold a narrow family stays narrow.", args: args{narrow, 64, 64}, want: narrow},
		"PastThresholdWides": {reason: "One namespace past the threshold a family goes wide.", args: args{narrow, 65, 64}, want: wide},
		"WideStaysAtHalf":    {reason: "A wide family at half the threshold stays wide.", args: args{wide, 32, 64}, want: wide},
		"WideStaysBetween":   {reason: "A wide family between half and the threshold stays wide.", args: args{wide, 50, 64}, want: wide},
		"BelowHalfNarrows":   {reason: "A wide family below half the threshold narrows again.", args: args{wide, 31, 64}, want: narrow},
		"NarrowStaysBetween": {reason: "A narrow family between half and the threshold stays narrow.", args: args{narrow, 50, 64}, want: narrow},
		"NoneNarrow":         {reason: "A family of no namespaces is narrow.", args: args{wide, 0, 64}, want: narrow},
		"ManyStayWide":       {reason: "A wide family past the threshold stays wide.", args: args{wide, 10000, 64}, want: wide},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := strategyFor(tc.args.now, tc.args.namespaces, tc.args.above)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstrategyFor(%v): -want +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}
