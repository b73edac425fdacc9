//go:build e2e

package crossplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// shards is the --shards of examples/crossplane/sharded-runtime.yaml.
const shards = 8

// testReplicas: the provider installed with examples/crossplane/sharded-runtime.yaml runs as two
// replicas, and they share the shards between them, each holding some and together all; the
// steps after this one act through both.
func testReplicas(t *testing.T) {
	rev := activeRevision(t).GetName()
	eventually(t, "two provider replicas sharing the "+fmt.Sprint(shards)+" shards", func(ctx context.Context) (bool, string, error) {
		p, ok := s.runtime.provider(rev)
		if !ok {
			return false, "the provider does not run", nil
		}
		var held []int
		total := 0
		for _, q := range p.all() {
			if !q.healthy(ctx) {
				return false, "a replica is not ready", nil
			}
			n, err := shardsHeld(ctx, q)
			if err != nil {
				return false, "", err
			}
			held = append(held, n)
			total += n
		}
		ok = len(held) == 2 && total == shards
		for _, n := range held {
			ok = ok && n > 0
		}
		return ok, fmt.Sprintf("shards held per replica: %v", held), nil
	})
}

// shardsHeld counts the shards a provider process holds the Lease of
// (clusterops_shard_held{shard="i"} 1).
func shardsHeld(ctx context.Context, p *revisionProcess) (int, error) {
	n := 0
	err := scrape(ctx, p, func(line string) {
		if strings.HasPrefix(line, "clusterops_shard_held{") && strings.HasSuffix(line, "} 1") {
			n++
		}
	})
	return n, err
}
