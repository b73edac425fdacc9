package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The SVG chart of the fleet report.

// chart draws two log-log panels: seconds to converge, and heap growth in
// MiB, against N; one line per kind and layout.
func chart(rs []result) string {
	const w, h, pad = 420, 300, 55
	series := map[string][]result{}
	for _, r := range rs {
		k := r.Kind + " (" + r.Layout + ")"
		series[k] = append(series[k], r)
	}
	names := make([]string, 0, len(series))
	for k := range series {
		names = append(names, k)
	}
	sort.Strings(names)
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", 2*w+220, h+40)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	panel := func(x0 int, title string, v func(r result) float64) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range rs {
			if y := v(r); y > 0 {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
		if math.IsInf(lo, 0) {
			lo, hi = 1, 10
		}
		lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
		if lo == hi {
			hi = lo * 10
		}
		nlo, nhi := 100.0, 10000.0
		px := func(n float64) float64 {
			return float64(x0+pad) + (math.Log10(n)-math.Log10(nlo))/(math.Log10(nhi)-math.Log10(nlo))*float64(w-pad-10)
		}
		py := func(y float64) float64 {
			return float64(h-pad+20) - (math.Log10(y)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*float64(h-pad-10)
		}
		fmt.Fprintf(&b, `<text x="%d" y="14" font-weight="bold">%s</text>`+"\n", x0+pad, title)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0+pad, h-pad+20, x0+w-10, h-pad+20)
		fmt.Fprintf(&b, `<line x1="%d" y1="20" x2="%d" y2="%d" stroke="black"/>`+"\n", x0+pad, x0+pad, h-pad+20)
		for _, n := range []float64{100, 1000, 10000} {
			fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", px(n), h-pad+34, strings.TrimSuffix(fmt.Sprintf("%.0f", n), ""))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">N managed resources (log)</text>`+"\n", x0+pad+(w-pad)/2, h-pad+48)
		for y := lo; y <= hi*1.0001; y *= 10 {
			fmt.Fprintf(&b, `<text x="%d" y="%.0f" text-anchor="end">%g</text>`+"\n", x0+pad-4, py(y)+4, y)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#ddd"/>`+"\n", x0+pad, py(y), x0+w-10, py(y))
		}
		for i, name := range names {
			var pts []string
			for _, r := range series[name] {
				if y := v(r); y > 0 {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(float64(r.N)), py(y)))
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", px(float64(r.N)), py(y), colors[i%len(colors)])
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", colors[i%len(colors)], strings.Join(pts, " "))
		}
	}
	panel(0, "seconds from apply to all Ready (log)", func(r result) float64 { return r.Seconds })
	panel(w, "provider heap growth, MiB (log)", func(r result) float64 { return (r.Heap - r.BaseHeap) / (1 << 20) })
	for i, name := range names {
		y := 30 + 16*i
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", 2*w+5, y, colors[i%len(colors)], 2*w+20, y+9, name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
