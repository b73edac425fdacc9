package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// targets are the keys of the targets' rows, as why.txt names them.
var targets = []string{"converge", "reconciles", "during", "heap", "goroutines", "watches", "restart-writes", "restart-idle", "growth", "tier",
	"sharded-heap", "sharded-watches", "sharded-requests", "sharded-kill", "sharded-change"}

// readWhy reads the hand-written reasons for the targets missed: a line
// "<target>: <why>" each, target one of targets (a misspelt one would
// never show), blank lines and lines starting with # skipped.
func readWhy(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	why := map[string]string{}
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok || !slices.Contains(targets, k) {
			return nil, fmt.Errorf("%s:%d: not \"<target>: <why>\" with a target of %v", path, i+1, targets)
		}
		why[k] = v
	}
	return why, nil
}
