package dashboard

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spacefix/spacefix/internal/textfmt"
)

// sortUsage orders names by calls, most first, then by name.
func sortUsage(us []nameUsage) {
	slices.SortFunc(us, func(a, b nameUsage) int {
		if c := cmp.Compare(b.Calls, a.Calls); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 760.0, 220.0
	padL, padR     = 44.0, 8.0
	padT, padB     = 12.0, 28.0
)

// usageChart draws billable calls per day as an SVG bar chart. It uses
// presentation attributes only, so the page's CSP needs no inline styles.
func usageChart(days []dayUsage) template.HTML {
	var peak int64
	for _, d := range days {
		peak = max(peak, d.Calls)
	}
	ticks := yTicks(peak)
	top := ticks[len(ticks)-1]
	steps := float64(len(ticks) - 1)
	plotW, plotH := chartW-padL-padR, chartH-padT-padB
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="Billable calls per day">`, chartW, chartH)
	for i, v := range ticks { // grid lines and y labels
		y := padT + plotH - plotH*float64(i)/steps
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e4e7ec"/>`, padL, chartW-padR, y, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#667085">%s</text>`, padL-6, y+4, textfmt.Thousands(v))
	}
	n := max(len(days), 1)
	slot := plotW / float64(n)
	barW := math.Max(1, slot*0.7)
	labelEvery := max(1, int(math.Ceil(float64(n)/10)))
	for i, d := range days {
		h := 0.0
		if top > 0 {
			h = plotH * float64(d.Calls) / float64(top)
		}
		x := padL + slot*float64(i) + (slot-barW)/2
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" fill="#4f6bed"><title>%s: %s calls</title></rect>`,
			x, padT+plotH-h, barW, h, d.Day, textfmt.Thousands(d.Calls))
		if i%labelEvery == 0 {
			t, _ := time.Parse(time.DateOnly, d.Day)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="#667085">%s</text>`,
				x+barW/2, chartH-8, t.Format("Jan 2"))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built from numbers and formatted dates only
}

// yTicks returns the y-axis labels for a chart whose tallest bar is peak:
// from 0 in equal steps of 1, 2 or 5 times a power of ten, the smallest
// such step that needs at most five of them, up to the first label at or
// above peak. Every label is a value a bar can have, so a bar of 6 ends on
// the line labelled 6. An empty chart gets 0 to 4.
func yTicks(peak int64) []int64 {
	if peak <= 0 {
		return []int64{0, 1, 2, 3, 4}
	}
	step := int64(1)
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if step = m * p; (peak+step-1)/step <= 5 {
				n := (peak + step - 1) / step
				ticks := make([]int64, n+1)
				for i := range ticks {
					ticks[i] = int64(i) * step
				}
				return ticks
			}
		}
	}
}
