package explore

import (
	"context"
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	chaosv1alpha1 "github.com/clusterops/provider-clusterops/apis/chaos/v1alpha1"
	copyv1alpha1 "github.com/clusterops/provider-clusterops/apis/copy/v1alpha1"
	workloadv1alpha1 "github.com/clusterops/provider-clusterops/apis/workload/v1alpha1"
	"github.com/clusterops/provider-clusterops/internal/controller/copyrule"
	"github.com/clusterops/provider-clusterops/internal/provider"
	"github.com/clusterops/provider-clusterops/internal/shard"
	"github.com/clusterops/provider-clusterops/internal/testenv"
)

// Describe is what a report of a violation shows of the world besides the
// oracle's own words: who holds each shard's Lease, and each managed
// resource's shard and conditions.
func (s *State) Describe(ctx context.Context) string {
	var b strings.Builder
	b.WriteString("shards:")
	for i := range shards {
		l := &coordinationv1.Lease{}
		name := fmt.Sprintf("%s-shard-%d", provider.LeaderElectionID, i)
		if err := s.World.c.Get(ctx, types.NamespacedName{Namespace: testenv.ProviderNamespace, Name: name}, l); err != nil {
			fmt.Fprintf(&b, " %d: %v;", i, err)
			continue
		}
		fmt.Fprintf(&b, " %d: %s;", i, ptr.Deref(l.Spec.HolderIdentity, ""))
	}
	mgs, err := s.World.managed(ctx)
	if err != nil {
		return b.String() + " " + err.Error()
	}
	for _, mg := range mgs {
		fmt.Fprintf(&b, "\n%T %s/%s shard %q (%s):", mg, mg.GetNamespace(), mg.GetName(), mg.GetLabels()[shard.Label], mg.GetLabels()[shard.LabelShards])
		for _, ct := range []xpv2.ConditionType{xpv2.TypeSynced, xpv2.TypeReady} {
			c := mg.GetCondition(ct)
			fmt.Fprintf(&b, " %s=%s %s %q;", ct, c.Status, c.Reason, c.Message)
		}
		switch v := mg.(type) {
		case *copyv1alpha1.CopyRule:
			o := v.Status.AtProvider
			fmt.Fprintf(&b, " copies %q, in sync %d of %d, problems %+v", o.Copies, o.CopiesInSync, o.IntendedCopies, o.Problems)
		case *chaosv1alpha1.ChaosAgent:
			o := v.Status.AtProvider
			c := v.GetCondition(chaosv1alpha1.TypeActing)
			fmt.Fprintf(&b, " Acting=%s %s %q; rounds %d, last %q, killed %d, scaled %d, rewritten %d, targets %v, stopped %v, actions %+v",
				c.Status, c.Reason, c.Message, o.RoundsRun, o.LastRoundSummary, o.PodsKilled, o.DeploymentsScaled, o.ConfigMapsRewritten, o.TargetNamespaces, o.StoppedNamespaces, o.RecentActions)
		case *workloadv1alpha1.ImmortalContainer:
			o := v.Status.AtProvider
			fmt.Fprintf(&b, " pod %s %s, startTimes %d, restarts %d, quickEnds %d, next restart %v", o.CurrentPod, o.PodUID, o.StartTimes, o.Restarts, o.QuickEnds, o.NextRestartTime)
		case *workloadv1alpha1.AppBundle:
			fmt.Fprintf(&b, " image %s, service %q, recent drift %+v", v.Spec.ForProvider.Image, v.Spec.ForProvider.Service, v.Status.AtProvider.RecentDrift)
		}
	}
	cms := &corev1.ConfigMapList{}
	if err := s.World.c.List(ctx, cms, client.HasLabels{copyrule.LabelRuleUID}); err == nil {
		for _, cm := range cms.Items {
			if !strings.HasPrefix(cm.Namespace, "team-"+s.World.id()+"-") {
				continue
			}
			fmt.Fprintf(&b, "\ncopy %s/%s rv %s created %s labels %v annotations %v data %v", cm.Namespace, cm.Name, cm.ResourceVersion, cm.CreationTimestamp.Format("15:04:05.000"), cm.Labels, cm.Annotations, cm.Data)
		}
	}
	return b.String()
}
