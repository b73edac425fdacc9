package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// decisionsDir holds the dated decision records: what was decided on a set
// of committed results, and the commit those results measured.
const decisionsDir = "docs/decisions"

// linkDecisions appends to b a link to each decision record that names
// results, the directory of a report's results, on a line "Results:
// <dir>". A record is written by hand once the results are committed; the
// report that shows them links it rather than copying it, so that the
// decision keeps its date while the report is generated again.
func linkDecisions(b *strings.Builder, results string) error {
	records, err := decisionsFor(decisionsDir, results)
	if err != nil {
		return err
	}
	if len(records) == 0 {
		return nil
	}
	b.WriteString("## Decisions taken on these results\n\n")
	for _, r := range records {
		fmt.Fprintf(b, "- [%s](../decisions/%s)\n", r.title, filepath.Base(r.path))
	}
	b.WriteString("\n")
	return nil
}

// A decision is a record of docs/decisions: its path and its title (the
// first line, without the heading's mark).
type decision struct{ path, title string }

// decisionsFor lists the records in dir that name results, oldest first (the
// file names start with their date).
func decisionsFor(dir, results string) ([]decision, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	want := filepath.Clean(results)
	var out []decision
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(raw), "\n")
		for _, l := range lines {
			v, ok := strings.CutPrefix(strings.TrimPrefix(strings.TrimSpace(l), "- "), "Results:")
			if ok && filepath.Clean(strings.Trim(strings.TrimSpace(v), "`")) == want {
				out = append(out, decision{path: p, title: strings.TrimSpace(strings.TrimLeft(lines[0], "# "))})
				break
			}
		}
	}
	return out, nil
}

// uncommittedNote says which of commits, those results measured, name a
// tree with changes not committed ("+changes"): such a result cannot be
// traced to a commit, and the bench scripts refuse to measure one, so it is
// to be measured again. Empty when there is none.
func uncommittedNote(commits []string) string {
	var dirty []string
	for _, c := range commits {
		if strings.HasSuffix(c, "+changes") && !slices.Contains(dirty, c) {
			dirty = append(dirty, c)
		}
	}
	if len(dirty) == 0 {
		return ""
	}
	return fmt.Sprintf("\nResults at %s were measured on a tree with changes not committed: they cannot be traced to a commit and are to be measured again.\n\n", strings.Join(dirty, ", "))
}
