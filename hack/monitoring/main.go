// Command monitoring generates the provider's monitoring files from Go: the
// alerting rules, typed as prometheus-operator's PrometheusRule and as a plain
// Prometheus rules file, a PodMonitor for the provider's pods, the Grafana
// dashboard (Grafana's foundation SDK), and the rules the e2e tier runs with
// short bounds. `make monitoring` runs it; TestGeneratedFilesAreCurrent fails
// when a committed file differs from what it generates.
//
// It is a module of its own so that Prometheus' and the SDK's dependencies
// stay out of the provider's module graph.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", "../..", "the repository's root, where the files are written")
	flag.Parse()
	files, err := generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, f := range files {
		p := filepath.Join(*root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := os.WriteFile(p, f.content, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
