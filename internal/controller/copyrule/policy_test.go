package copyrule

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
)

func TestMayDelete(t *testing.T) {
	cases := map[string]struct {
		policies xpv2.ManagementPolicies
		want     bool
	}{
		"Unset":         {nil, true},
		"All":           {xpv2.ManagementPolicies{xpv2.ManagementActionAll}, true},
		"ObserveOnly":   {xpv2.ManagementPolicies{xpv2.ManagementActionObserve}, false},
		"WithDelete":    {xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionDelete}, true},
		"WithoutDelete": {xpv2.ManagementPolicies{xpv2.ManagementActionObserve, xpv2.ManagementActionCreate, xpv2.ManagementActionUpdate, xpv2.ManagementActionLateInitialize}, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cr := &v1alpha1.CopyRule{}
			cr.SetManagementPolicies(tc.policies)
			if got := mayDelete(cr); got != tc.want {
				t.Errorf("mayDelete(policies %v) = %t, want %t", tc.policies, got, tc.want)
			}
		})
	}
}
